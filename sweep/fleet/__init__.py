"""sweep.fleet"""
