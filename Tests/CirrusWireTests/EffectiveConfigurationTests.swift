import CirrusWire
import Testing

/// CloudKit's configuration merge rule as the server applies it to an `Open`.
@Suite("Open: the effective configuration")
struct EffectiveConfigurationTests {
    @Test func theOperationsExplicitValuesWinThenTheGroupsThenNothing() {
        let operation = Wire.OperationConfiguration(isLongLived: false, timeoutIntervalForRequestMs: 5_000)
        let group = Wire.OperationConfiguration(
            containerIdentifier: "iCloud.group", qualityOfService: .utility, isLongLived: true,
            timeoutIntervalForRequestMs: 9_000, timeoutIntervalForResourceMs: 60_000)
        let merged = operation.merged(over: group)
        #expect(merged.isLongLived == false, "explicit false is a value, not an absence")
        #expect(merged.timeoutIntervalForRequestMs == 5_000)
        #expect(merged.timeoutIntervalForResourceMs == 60_000)
        #expect(merged.qualityOfService == .utility)
        #expect(merged.containerIdentifier == "iCloud.group")
        #expect(merged.allowsCellularAccess == nil, "neither sets it: the default applies")
        #expect(operation.merged(over: nil) == operation)
    }

    @Test func anOpenRunsWithTheMergedConfigurationAndItsContainer() {
        let group = Wire.OperationGroup(
            operationGroupID: "g", defaultConfiguration: Wire.OperationConfiguration(containerIdentifier: "iCloud.b", isLongLived: true))
        let open = Wire.Open(operationID: "o", containerIdentifier: "iCloud.a", group: group)
        let effective = open.effective
        #expect(effective.configuration?.isLongLived == true)
        #expect(effective.containerIdentifier == "iCloud.b", "the configuration's container wins over the Open's")
        #expect(effective.group == group, "the group itself is kept")

        let plain = Wire.Open(operationID: "o", containerIdentifier: "iCloud.a")
        #expect(plain.effective == plain, "nothing to merge: the Open as it came")
        let emptyContainer = Wire.Open(
            operationID: "o", containerIdentifier: "iCloud.a", configuration: Wire.OperationConfiguration(containerIdentifier: ""))
        #expect(emptyContainer.effective.containerIdentifier == "iCloud.a", "an empty container names none")
    }
}
