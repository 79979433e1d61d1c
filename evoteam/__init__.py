"""evoteam: evolving agent teams for open-ended optimisation, as MCP servers for coding agents."""

__version__ = "0.1.0"
