package streams_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

// An HTTP lookup served through interactive queries: each instance runs with
// ApplicationServer set to its own HTTP address; a request for a word is answered from the
// local store when this instance runs the word's task, and forwarded to the instance that
// does otherwise.
func ExampleMetadataForKey() {
	const self = "10.0.0.1:8080"
	var app *streams.App // streams.New(b, streams.Config{..., ApplicationServer: self}), running
	http.HandleFunc("/count", func(w http.ResponseWriter, r *http.Request) {
		word := r.URL.Query().Get("word")
		md, err := streams.MetadataForKey(app, "counts", word, serde.String)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable) // rebalancing: retry
			return
		}
		if md.Active.String() != self {
			resp, err := http.Get("http://" + md.Active.String() + "/count?word=" + url.QueryEscape(word))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			_, _ = io.Copy(w, resp.Body)
			return
		}
		counts, err := streams.Store[string, int64](app, "counts", streams.InPartition(md.Partition))
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable) // restoring or moved: retry
			return
		}
		n, _, err := counts.Get(word)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, n)
	})
}
