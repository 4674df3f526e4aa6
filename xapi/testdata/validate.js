// Runs Learning Locker's xAPI statement validator (npm @learninglocker/xapi-validation) on every
// statement of the JSON array in the file named by the first argument, and prints one line per
// warning: "statement N: path: message". It exits 1 when there is any, 0 otherwise.
const fs = require('fs');
const validate = require('@learninglocker/xapi-validation').default;
const statements = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
let warnings = 0;
statements.forEach((s, i) => {
  for (const w of validate(s)) {
    warnings++;
    console.log(`statement ${i}: ${w.path.join('.')}: ${w.message} (${JSON.stringify(w.data)})`);
  }
});
process.exit(warnings > 0 ? 1 : 0);
