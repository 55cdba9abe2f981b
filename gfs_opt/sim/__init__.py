"""gfs_opt.sim"""
