// CirrusStore: see DESIGN.md §1.
