"""Model code the renderer copies into a node's model repository (never imported by the tool)."""
