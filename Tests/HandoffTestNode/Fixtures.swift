import Foundation
import Handoff

/// Every kind of userInfo value, nested ones included: what the end-to-end tests expect to arrive intact.
public let everyKindOfUserInfo: [String: UserInfoValue] = [
    "string": "Ada Lovelace ✍️",
    "int": .int(-9_007_199_254_740_993),
    "double": 3.141592653589793,
    "bool": true,
    "bytes": .bytes(Data([0, 1, 2, 254, 255])),
    "url": .url(URL(string: "https://example.org/contacts/ada?tab=notes#top")!),
    "date": .date(Date(timeIntervalSince1970: 1_700_000_000.123456)),
    "list": ["one", 2, 3.5, false, ["nested"]],
    "map": ["phone": "+44 20 7946 0000", "tags": ["math", "poetry"], "visits": 12],
]
