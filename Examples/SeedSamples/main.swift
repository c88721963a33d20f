import CirrusKit

// Seed 002's samples compile (Scripts/check-examples.sh builds this target and checks each
// sample is here as written). They are functions the program does not call: most need an app
// around them (a server, records, a user waiting), which the ReadmeClient and NotesSync
// examples show running.
print("Seed 002 samples: 22 samples compiled with import CirrusKit alone")
