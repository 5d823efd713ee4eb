/// Moves a value out of `place`, leaving an empty one there: a swap, so no reference count
/// changes hands. (A copy retains what it copies, and what stays in the place is released where
/// the place is let go: a decoded envelope's strings, taken into the activity it describes.)
@inline(__always)
func take<Value: RangeReplaceableCollection>(_ place: inout Value) -> Value {
    var taken = Value()
    swap(&taken, &place)
    return taken
}
