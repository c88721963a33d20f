import Testing
@testable import CirrusServer

@Test func moduleLoads() {}
