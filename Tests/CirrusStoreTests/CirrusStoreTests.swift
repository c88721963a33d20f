import Testing
@testable import CirrusStore
