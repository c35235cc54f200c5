package jobconfig

// KeyInputs is the job config key that maps the paths a text source names
// to blob keys or key prefixes, as a JSON object. A client that uploads
// local files before submitting (sluice run, sdk/client.StageInputs) sets it:
//
//	inputs = {"/home/me/books": "tenants/default/uploads/3f2a/books/",
//	          "notes.txt":      "tenants/default/uploads/3f2a/notes.txt"}
const KeyInputs = "inputs"
