"""Kit formats: native ``kit.json`` kits, FlashInfer-Bench definitions and trace sets, OpenEvolve
and SkyDiscover task folders, FIB solutions, and where kits are found and trusted.
"""
