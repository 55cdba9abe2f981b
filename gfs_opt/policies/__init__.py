"""gfs_opt.policies"""
