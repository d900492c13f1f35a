"""sweep.workload"""
