"""sweep.views"""
