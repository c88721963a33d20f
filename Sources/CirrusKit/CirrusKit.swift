// CirrusKit: see DESIGN.md §1.
