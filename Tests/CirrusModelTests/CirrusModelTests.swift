import Testing
@testable import CirrusModel
