"""sweep.report"""
