package reconciler

import (
	"hash/fnv"
	"sort"
)

// Assign shares names between the members ids, the same way wherever it
// runs: each name goes to the member ranking highest for it by rendezvous
// hashing that has fewer than ⌈names/members⌉ already, names taken in
// order. A member joining or leaving moves few names.
func Assign(names, ids []string) map[string]string {
	out := make(map[string]string, len(names))
	if len(ids) == 0 {
		return out
	}
	limit := (len(names) + len(ids) - 1) / len(ids)
	load := make(map[string]int, len(ids))
	ranked := make([]string, len(ids))
	for _, name := range names {
		copy(ranked, ids)
		sort.Slice(ranked, func(a, b int) bool {
			ha, hb := rendezvous(name, ranked[a]), rendezvous(name, ranked[b])
			if ha != hb {
				return ha > hb
			}
			return ranked[a] < ranked[b]
		})
		for _, id := range ranked {
			if load[id] < limit {
				out[name] = id
				load[id]++
				break
			}
		}
	}
	return out
}

func rendezvous(name, id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return h.Sum64()
}
