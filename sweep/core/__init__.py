"""sweep.core"""
