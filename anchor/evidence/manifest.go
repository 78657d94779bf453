package evidence

// Format is the manifest's "format" value.
const Format = "provlog-evidence/v1"

// File names in an evidence directory (see the package doc).
const (
	ManifestFile    = "manifest.json"
	EntryFile       = "entry.json"
	ReceiptFile     = "receipt.tlog-proof"
	COSEFile        = "receipt.cose"
	IssuedFile      = "issued.tlog-proof"
	ConsistencyFile = "consistency"
	CheckpointFile  = "checkpoint"
	AnchorFile      = "anchor.json"
	TimestampsDir   = "timestamps"
	RekorDir        = "rekor"
	VKeyFile        = "log.vkey"
	AnchorPubFile   = "anchor.pub"
	WitnessesFile   = "witnesses.txt"
	TSARootsFile    = "trust/tsa-roots.pem"
	RekorKeysFile   = "trust/rekor-keys.pem"
	ContextDir      = "context"
	// The smallest anchor record covering the entry when it was left out
	// for its times, the entry it dates before, and that entry's proof.
	SkippedAnchorFile = "skipped/anchor.json"
	SkippedEntryFile  = "skipped/entry.json"
	SkippedProofFile  = "skipped/entry.tlog-proof"
)

// ConsistencyHeader is the first line of the consistency file.
const ConsistencyHeader = "provlog-consistency@v1"

// Manifest is manifest.json. It is not signed: every value in it follows
// from the other files, and [Verify] requires manifest.json to be exactly
// what they give.
type Manifest struct {
	Format string `json:"format"`
	Origin string `json:"origin"`
	// Index, LeafHash (hex) and Kind name the entry.
	Index    uint64 `json:"index"`
	LeafHash string `json:"leaf_hash"`
	Kind     string `json:"kind"`
	// Size and Root (base64) repeat the target checkpoint's.
	Size uint64 `json:"size"`
	Root string `json:"root"`
	// IssuedSize is the size of the issued receipt's checkpoint.
	IssuedSize uint64 `json:"issued_size"`
	// Anchored and Cosigned say whether the target checkpoint is anchored
	// and cosigned under the witness policy in witnesses.txt.
	Anchored bool `json:"anchored"`
	Cosigned bool `json:"cosigned"`
	// Missing says in words what a complete evidence would hold and this
	// one does not; empty when nothing is missing.
	Missing []string `json:"missing"`
	// Context lists the entries under context/, in index order.
	Context []ContextEntry `json:"context"`
	// Files maps every other file to its hex SHA-256.
	Files map[string]string `json:"files"`
}

// A ContextEntry is one entry under context/ and why it is there: "genesis",
// the task entry kinds ("task.create", "task.accept", "task.claim", ...), or
// "cited" for an entry a claim cites.
type ContextEntry struct {
	Index uint64 `json:"index"`
	Role  string `json:"role"`
}
