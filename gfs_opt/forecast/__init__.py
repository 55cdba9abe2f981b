"""gfs_opt.forecast"""
