"""Small parts every layer may use: atomic file writes, the bad-input error, the run directory's file
names, the config's resolvers and the silencing of known library notices. Imports nothing else of
noisydml."""
