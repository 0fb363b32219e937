"""Serving integrations of ferrox. Each lives in its own module and imports its
framework only when that module is imported (`import ferrox` never needs them):

- `ferrox.serve.ray`: replicas of the native `ferrox serve` behind Ray Serve
  (docs/scale-out.md).
"""
