"""sweep.ui"""
