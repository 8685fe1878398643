"""repository"""
