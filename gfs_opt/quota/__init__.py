"""gfs_opt.quota"""
