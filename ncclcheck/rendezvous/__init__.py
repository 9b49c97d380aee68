"""How processes find each other and agree: the store, the time bounds, the journal, the agreement."""
