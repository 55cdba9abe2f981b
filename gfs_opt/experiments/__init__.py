"""gfs_opt.experiments"""
