"""Embedded apps (shop, social, mail, notes, settings) in English and Chinese.

They are what the default run crawls: real pages with ground truth, served on
127.0.0.1, whose state decides whether a task succeeded.
"""
