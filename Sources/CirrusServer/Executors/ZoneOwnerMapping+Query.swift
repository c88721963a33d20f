import CirrusWire

extension ZoneOwnerMapping {
    /// The query with every reference value's zone owner resolved, so
    /// `recordID == %@` and reference comparisons name zones as the store does.
    func inbound(_ query: Wire.Query) -> Wire.Query {
        var query = query
        query.predicate = query.predicate.map(self.inbound)
        return query
    }

    /// Recursion is bounded: the wire codec refuses messages nested deeper than 64 levels.
    private func inbound(_ predicate: Wire.QueryPredicate) -> Wire.QueryPredicate {
        var predicate = predicate
        switch predicate.node {
        case .comparison(var comparison):
            if let kind = comparison.value?.kind { comparison.value = Wire.FieldValue(kind: self.inbound(kind)) }
            predicate.node = .comparison(comparison)
        case .andPredicate(var and):
            and.operands = and.operands.map(self.inbound)
            predicate.node = .andPredicate(and)
        case .notPredicate(var not):
            not.operand = not.operand.map(self.inbound)
            predicate.node = .notPredicate(not)
        case .truePredicate, .falsePredicate, .textSearch, .distance, .none:
            break
        }
        return predicate
    }

    private func inbound(_ value: Wire.FieldValue.Kind) -> Wire.FieldValue.Kind {
        func map(_ reference: Wire.Reference) -> Wire.Reference {
            var reference = reference
            if var recordID = reference.recordID, let zoneID = recordID.zoneID {
                recordID.zoneID = self.inbound(zoneID)
                reference.recordID = recordID
            }
            return reference
        }
        switch value {
        case .referenceValue(let reference):
            return .referenceValue(map(reference))
        case .referenceList(var list):
            list.values = list.values.map(map)
            return .referenceList(list)
        default:
            return value
        }
    }
}
