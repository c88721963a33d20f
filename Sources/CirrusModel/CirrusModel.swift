// CirrusModel: see DESIGN.md §1.
