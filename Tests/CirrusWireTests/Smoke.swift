import Testing
@testable import CirrusWire

@Test func moduleLoads() {}
