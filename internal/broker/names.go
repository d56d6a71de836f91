package broker

// MaxNameLength bounds topic and group names (as Kafka's topic names).
const MaxNameLength = 249

// ValidateName checks a topic or group name: 1 to 249 characters of
// [a-zA-Z0-9._-], and not "." or "..".
func ValidateName(kind, name string) error {
	if len(name) == 0 || len(name) > MaxNameLength {
		return errorf(ErrInvalidTopicName, "%s name must be 1 to %d characters, got %d", kind, MaxNameLength, len(name))
	}
	if name == "." || name == ".." {
		return errorf(ErrInvalidTopicName, "%s name %q is reserved", kind, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return errorf(ErrInvalidTopicName, "%s name %q has %q at byte %d; allowed are [a-zA-Z0-9._-]", kind, name, c, i)
		}
	}
	return nil
}

// reservedTopics are the names of Kafka's internal topics: Kafka clients
// and tools give them a meaning, so no topic may take them.
var reservedTopics = map[string]bool{"__consumer_offsets": true, "__transaction_state": true}

// ValidateTopicName checks the name of a topic to create: a valid name
// (ValidateName) that is not one of Kafka's internal topics.
func ValidateTopicName(name string) error {
	if err := ValidateName("topic", name); err != nil {
		return err
	}
	if reservedTopics[name] {
		return errorf(ErrInvalidTopicName, "topic name %q is reserved: Kafka clients and tools treat it as an internal topic", name)
	}
	return nil
}
