package proxy

import (
	"encoding/json"
	"testing"
)

// TestReceiptData: a failed call's error data is its receipt under
// ReceiptKey, byte for byte as encoding/json writes that map.
func TestReceiptData(t *testing.T) {
	for _, receipt := range []string{
		"",
		"example.org/log\n42\nabc=\n\n— example.org/log Az3x\n",
		"<a&b>\t\"q\"\\\u2028\xff",
	} {
		want, err := json.Marshal(map[string]string{ReceiptKey: receipt})
		if err != nil {
			t.Fatal(err)
		}
		if got := receiptData(receipt); string(got) != string(want) {
			t.Errorf("receiptData(%q) = %s, want %s", receipt, got, want)
		}
	}
}
