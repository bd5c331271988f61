"""instructor"""
