import Testing
@testable import CirrusTLS

@Test func moduleLoads() {}
