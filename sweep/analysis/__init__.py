"""sweep.analysis"""
