"""gfs_opt.preempt"""
