"""gfs_opt.traces"""
