"""sweep.study"""
