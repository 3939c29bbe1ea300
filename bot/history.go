package bot

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gapless-dev/gapless/state"
)

// prEventData is the Data of the bot's history events.
type prEventData struct {
	Repo          string `json:"repo"`
	Number        int    `json:"number"`
	HeadSHA       string `json:"head_sha,omitempty"`
	Sender        string `json:"sender,omitempty"`
	Deploy        string `json:"deploy,omitempty"`
	Generation    int64  `json:"generation,omitempty"`
	PREnvironment string `json:"pr_environment,omitempty"`
	MergeSHA      string `json:"merge_sha,omitempty"`
	Error         string `json:"error,omitempty"`
}

// appendEvent appends one history event with data.
func (b *Bot) appendEvent(ctx context.Context, e state.Event, data prEventData) error {
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encoding a %s event: %w", e.Kind, err)
	}
	e.Data = raw
	e.At = b.now()
	if _, err := b.d.Store.AppendEvents(ctx, e); err != nil {
		return fmt.Errorf("recording a %s event: %w", e.Kind, err)
	}
	return nil
}
