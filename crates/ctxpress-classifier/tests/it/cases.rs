//! Table-driven labelled cases: a positive and a near-miss negative for every
//! reason and key provider, plus multilingual prose, Markdown, CSS class lists,
//! shell sessions, diffs, logs, stack traces, YAML, TOML, poetry and chat prose
//! that mentions SQL words.
#![allow(missing_docs)]

use ctxpress_classifier::classify;
use ctxpress_core::Reason::{self, *};
use ctxpress_core::Tier;

struct Case {
    name: &'static str,
    text: String,
    has: Vec<Reason>,
    not: Vec<Reason>,
    tier: Option<Tier>,
    no_hard: bool,
    plain: bool,
}

fn t(name: &'static str, text: impl Into<String>) -> Case {
    Case {
        name,
        text: text.into(),
        has: vec![],
        not: vec![],
        tier: None,
        no_hard: false,
        plain: false,
    }
}

impl Case {
    fn has(mut self, r: &[Reason]) -> Self {
        self.has.extend_from_slice(r);
        self
    }
    fn not(mut self, r: &[Reason]) -> Self {
        self.not.extend_from_slice(r);
        self
    }
    fn tier(mut self, tier: Tier) -> Self {
        self.tier = Some(tier);
        self
    }
    /// No hard reason at all (compressible text).
    fn soft_only(mut self) -> Self {
        self.no_hard = true;
        self
    }
    /// Plain prose: no reason at all (tier T2 or T3 by length).
    fn prose(mut self) -> Self {
        self.plain = true;
        self
    }
}

const FILLER: &str = "We talked about it for a while and then moved on to the next item on the agenda for the afternoon.";

fn cases() -> Vec<Case> {
    let mut v = vec![
        // ---------------------------------------------------------------- code_fence
        t("fence", "Try this:\n```rust\nfn main() { println!(\"hi\"); }\n```\n").has(&[CodeFence]),
        t("fence_tilde", "Config:\n~~~\nkey value\n~~~").has(&[CodeFence]),
        t("fence_unclosed", "Output was cut:\n```\nline one\nline two").has(&[CodeFence]),
        t("fence_inline_backticks_no", "Use ``` to open a block and close it the same way, which is standard markdown syntax.").not(&[CodeFence]),
        t("fence_two_backticks_no", "The ``double`` ticks are used for inline code containing a single backtick, that is all.").not(&[CodeFence]),
        // ---------------------------------------------------------------- indented_code
        t("indented", "Example:\n\n    let x = compute(1, 2);\n    println!(\"{x}\");\n").has(&[IndentedCode]),
        t("indented_tab", "Example:\n\n\tif (a > b) {\n\t\treturn a;\n\t}\n").has(&[IndentedCode]),
        t("indented_nested_list_no", "Steps:\n\n- build the project\n    - run the unit tests\n    - check the coverage report\n- ship it").not(&[IndentedCode]),
        t("indented_single_line_no", "Note:\n\n    see the docs for details\n\nand that is it for today.").not(&[IndentedCode]),
        t("indented_prose_no", "Dear team,\n\n    I hope this finds you well and rested\n    after the long weekend away\n").not(&[IndentedCode]),
        // diffs and shell sessions count as code outside fences
        t("diff", "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,3 @@\n-fn old() {}\n+fn new() {}\n context").has(&[IndentedCode]),
        t("diff_hunk_only", "@@ -10,7 +10,8 @@ impl Foo {\n     let a = 1;\n-    let b = 2;\n+    let b = 3;").has(&[IndentedCode]),
        t("diff_words_no", "The diff between the two drafts was small: we changed a few words and moved one paragraph up near the top.").not(&[IndentedCode]).soft_only(),
        t("shell_session", "$ ls -la\ntotal 8\ndrwxr-xr-x 2 user user 4096 Jan 1 .\n$ cat README.md\nHello world").has(&[IndentedCode]).not(&[ApiKey, VersePattern, SqlContent]),
        t("shell_single_prompt_no", "$ make\nthen wait for the build to finish and check that the binary was produced in the target directory").not(&[IndentedCode]),
        t("shell_price_no", "It cost $ 5 at the store\nand $ 10 at the market, which seemed like a lot for a small bag of apples.").not(&[IndentedCode, LatexMath]),
        // ---------------------------------------------------------------- json_structure
        t("json_object", "{\"name\": \"ctxpress\", \"version\": 1, \"tags\": [\"a\", \"b\"]}").has(&[JsonStructure, QuotedKey]),
        t("json_array", "[{\"id\": 1}, {\"id\": 2}]").has(&[JsonStructure]),
        t("json_numbers", "[1, 2, 3, 4]").has(&[JsonStructure]),
        t("json_truncated", "{\"results\": [{\"path\": \"src/main.rs\", \"line\": 12}, {\"path\": \"src/lib.rs\", \"li").has(&[JsonStructure]),
        t("json_footnote_no", "[1] See the appendix for the full derivation of the result, which is long and not very interesting [2].").not(&[JsonStructure]),
        t("json_braces_prose_no", "{Note} this paragraph starts with a brace but it is ordinary prose with no structure at all in it.").not(&[JsonStructure]),
        t("json_mid_text_no", "The API returned an object and we parsed it without trouble, then stored the fields in the cache for later.").not(&[JsonStructure]).prose(),
        // ---------------------------------------------------------------- yaml_structure
        t("yaml", "name: ctxpress\nversion: 0.1.0\nauthors:\n  - alice\n  - bob\nedition: 2024").has(&[YamlStructure]),
        t("yaml_compose", "services:\n  web:\n    image: nginx\n    ports:\n      - \"80:80\"").has(&[YamlStructure]),
        t("toml", "[package]\nname = \"ctxpress\"\nversion = \"0.1.0\"\n\n[dependencies]\nserde = \"1\"").has(&[YamlStructure]),
        t("ini", "[server]\nhost = localhost\nport = 8080\ntimeout = 30").has(&[YamlStructure]),
        t("yaml_two_lines_no", "Note: the build failed last night.\nReason: a missing dependency in the lock file, which we fixed this morning.").not(&[YamlStructure]),
        t("yaml_prose_colon_no", "There is one thing to remember: always run the tests before pushing. Another thing: write good commit messages.").not(&[YamlStructure]),
        t("yaml_time_no", "We meet at 10:30 every day.\nLunch is at 12:00 sharp.\nThe call is at 15:45 on Fridays.").not(&[YamlStructure]),
        // ---------------------------------------------------------------- high_special_char_ratio
        t("special", "a[i] = (b + c) * {d} | e & f; g <> h @ #$%").has(&[HighSpecialCharRatio]),
        t("special_md_table", "| Name | Age | City |\n|------|-----|------|\n| Alice | 30 | Paris |\n| Bob | 25 | Berlin |").has(&[HighSpecialCharRatio]),
        t("special_md_bold_no", "* **Speed**: it is fast enough for most uses we have seen\n* **Safety**: no unsafe code anywhere in the crate\n* **Size**: the binary stays small").not(&[HighSpecialCharRatio]),
        t("special_headings_no", "## Overview\n\nThis section explains the design in plain words and without much punctuation at all.\n\n### Details\n\nMore words follow here.").not(&[HighSpecialCharRatio]),
        // ---------------------------------------------------------------- high_line_length_variance
        t("variance", format!("a\nb\nc\nd\ne\nf\n{}", "word ".repeat(120))).has(&[HighLineLengthVariance]),
        t("variance_three_lines_no", format!("a\nb\n{}", "word ".repeat(120))).not(&[HighLineLengthVariance]),
        t("variance_paragraphs_no", format!("{FILLER}\n\n{FILLER}\n\n{FILLER}\n\n{FILLER}")).not(&[HighLineLengthVariance]).prose(),
        // ---------------------------------------------------------------- latex_math
        t("latex_display", "The energy is $$E = mc^2$$ as usual.").has(&[LatexMath]),
        t("latex_inline", "Let $x^2 + y^2 = r^2$ be the circle.").has(&[LatexMath]),
        t("latex_single_var", "where $n$ is the number of items in the list").has(&[LatexMath]),
        t("latex_frac", "The ratio is \\frac{a}{b} in the limit.").has(&[LatexMath]),
        t("latex_begin", "\\begin{equation}\n a = b \n\\end{equation}").has(&[LatexMath]),
        t("latex_bracket", "Solve \\[ a x + b = 0 \\] for x.").has(&[LatexMath]),
        t("latex_prices_no", "The lunch cost $12 and the dinner cost $30, so $42 in total for the day, which is fine.").not(&[LatexMath]),
        t("latex_shell_vars_no", "Set $HOME_DIR and $PATH before running, then export ${CONFIG}/bin:$PATH again.").not(&[LatexMath]),
        t("latex_windows_path_no", "Open C:\\Users\\frank\\internal\\summary.txt in the editor and fix it.").not(&[LatexMath]),
        // ---------------------------------------------------------------- unicode_math
        t("umath", "For all x ∈ ℝ we have ∑ a_i ≤ ∞.").has(&[UnicodeMath]),
        t("umath_integral", "∫ f(x) dx ≈ 0.5 over the interval").has(&[UnicodeMath]),
        t("umath_single_no", "We need ≥ 100 users before the launch can go ahead as planned next spring.").not(&[UnicodeMath]),
        t("umath_arrows_no", "Click Settings → Privacy → Cookies and then × to close the dialog window.").not(&[UnicodeMath]),
        t("umath_greek_no", "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο και μετά τρέχει μακριά στο δάσος όπου κανείς δεν τη βρίσκει.").not(&[UnicodeMath]).prose(),
        // ---------------------------------------------------------------- sql_content
        t("sql_select", "SELECT * FROM users WHERE id = 42;").has(&[SqlContent]),
        t("sql_select_from", "SELECT name, email FROM accounts;").has(&[SqlContent]),
        t("sql_group_by", "then aggregate with GROUP BY region").has(&[SqlContent]),
        t("sql_create", "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL);").has(&[SqlContent]),
        t("sql_join", "SELECT a.x FROM a LEFT JOIN b ON a.id = b.id").has(&[SqlContent]),
        t("sql_lower", "select * from orders where total > 100 order by created_at desc").has(&[SqlContent]),
        t("sql_insert_lower", "insert into logs (level, msg) values ('info', 'ok')").has(&[SqlContent]),
        t("sql_update_lower", "update users set active = 0 where last_login < now()").has(&[SqlContent]),
        t("sql_weak_three", "UNION of the two sets, WHERE clause and DISTINCT values").has(&[SqlContent]),
        t("sql_prose_select_no", "Please select the files where the update failed and delete them from the list.").not(&[SqlContent]),
        t("sql_prose_where_no", "The WHERE clause in your query is wrong, I think, but the rest of it looks fine to me.").not(&[SqlContent]),
        t("sql_prose_view_schema_no", "Open the VIEW menu, pick SCHEMA and then FETCH the latest data from the server.").not(&[SqlContent]),
        t("sql_prose_order_no", "In order by the time we arrived, the group by the river had left with the primary key holder.").not(&[SqlContent]),
        t("sql_prose_join_no", "Join us for lunch where we will select a venue and update everyone on the plan.").not(&[SqlContent]).soft_only(),
        t("sql_chat_mention_no", "I know a bit of SQL and mostly use simple queries for reports at work, nothing too fancy honestly.").not(&[SqlContent]).prose(),
        // ---------------------------------------------------------------- verse_pattern
        t("verse", "Shall I compare thee to a summers day\nThou art more lovely and more temperate\nRough winds do shake the darling buds of May\nAnd summers lease hath all too short a date").has(&[VersePattern]),
        t("verse_commas", "The woods are lovely, dark and deep,\nBut I have promises to keep,\nAnd miles to go before I sleep,\nAnd miles to go before I sleep.").has(&[VersePattern]),
        t("verse_sentences_no", "The server started.\nThe client connected.\nThe request failed.\nThe retry worked.").not(&[VersePattern]),
        t("verse_titles_no", "Getting Started Guide\nInstalling The Tool\nRunning The Tests\nContributing To The Project").not(&[VersePattern]),
        t("verse_logs_no", "INFO Starting the server now\nINFO Listening on the port\nWARN Slow response from backend\nINFO Request handled fine").not(&[VersePattern]),
        t("verse_three_lines_no", "Roses are red and so on\nViolets are blue as well\nSugar is sweet they say").not(&[VersePattern]),
        // ---------------------------------------------------------------- error_traceback
        t("trace_python", "Traceback (most recent call last):\n  File \"app.py\", line 10, in <module>\n    main()\n  File \"app.py\", line 6, in main\n    raise ValueError(\"bad\")\nValueError: bad").has(&[ErrorTraceback]),
        t("trace_python_frames_only", "  File \"/usr/lib/python3.11/json/decoder.py\", line 337, in decode\n    obj, end = self.raw_decode(s, idx=_w(s, 0).end())\n  File \"/usr/lib/python3.11/json/decoder.py\", line 355, in raw_decode").has(&[ErrorTraceback]),
        t("trace_java", "Exception in thread \"main\" java.lang.NullPointerException\n\tat com.example.App.run(App.java:42)\n\tat com.example.App.main(App.java:10)").has(&[ErrorTraceback]),
        t("trace_java_caused", "java.lang.IllegalStateException: boom\n    at org.foo.Bar.baz(Bar.java:12)\n    at org.foo.Main.main(Main.java:5)").has(&[ErrorTraceback]),
        t("trace_kotlin", "kotlin.KotlinNullPointerException\n\tat MainKt.main(Main.kt:3)").has(&[ErrorTraceback]),
        t("trace_rust", "thread 'main' panicked at src/main.rs:4:5:\ncalled `Option::unwrap()` on a `None` value\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace").has(&[ErrorTraceback]),
        t("trace_rust_backtrace", "stack backtrace:\n   0: rust_begin_unwind\n             at /rustc/abc/library/std/src/panicking.rs:645:5\n   1: core::panicking::panic_fmt\n             at /rustc/abc/library/core/src/panicking.rs:72:14").has(&[ErrorTraceback]),
        t("trace_node", "TypeError: Cannot read properties of undefined (reading 'x')\n    at Object.<anonymous> (/app/index.js:3:15)\n    at Module._compile (node:internal/modules/cjs/loader:1256:14)").has(&[ErrorTraceback]),
        t("trace_node_frames", "    at processTicksAndRejections (node:internal/process/task_queues:95:5)\n    at async main (/srv/app/server.js:88:3)").has(&[ErrorTraceback]),
        t("trace_go", "panic: runtime error: index out of range [3] with length 3\n\ngoroutine 1 [running]:\nmain.main()\n\t/tmp/x.go:8 +0x1d").has(&[ErrorTraceback]),
        t("trace_mention_no", "The traceback shows a KeyError somewhere in the config loader, so I will look at the file tomorrow morning.").not(&[ErrorTraceback]),
        t("trace_at_prose_no", "We met at the station at noon\n    at least I think it was noon\n    at the main entrance").not(&[ErrorTraceback]),
        t("trace_error_word_no", "Error handling in this module is fine: every call returns a Result and callers propagate it upward.").not(&[ErrorTraceback]),
        t("trace_exception_no", "An exception in thread safety reasoning is when the data is immutable and shared across readers.").not(&[ErrorTraceback]),
        t("trace_panic_word_no", "Do not panic at the sight of red text; most warnings are harmless and can be ignored for now.").not(&[ErrorTraceback]),
        // ---------------------------------------------------------------- url
        t("url", "Docs are at https://docs.example.com/api/v2 for reference.").has(&[Url]).soft_only(),
        t("url_http", "Old link: http://example.org/index.html still works.").has(&[Url]),
        t("url_scheme_only_no", "Type http:// and then the host name into the address bar of the browser window.").not(&[Url]),
        t("url_bare_domain_no", "Go to example dot com and sign up for an account with your work address please.").not(&[Url]).prose(),
        // ---------------------------------------------------------------- email
        t("email", "Write to alice.smith+news@example.co.uk for access.").has(&[Email]).soft_only(),
        t("email_simple", "Contact bob@example.com today.").has(&[Email]),
        t("email_decorator_no", "Use @property and @staticmethod decorators in the class body to expose the values cleanly.").not(&[Email]),
        t("email_mention_no", "Thanks @alice for the review and @bob for the quick fix on the parser yesterday.").not(&[Email]),
        t("email_no_tld_no", "ssh into user@localhost and run the script there once more please.").not(&[Email]),
        // ---------------------------------------------------------------- phone
        t("phone_us", "Call me at (555) 123-4567 tomorrow.").has(&[Phone]).soft_only(),
        t("phone_dashes", "Support line: 555-123-4567.").has(&[Phone]),
        t("phone_intl", "Office: +44 20 7946 0958 in London.").has(&[Phone]),
        t("phone_date_no", "The release is planned for 2024-10-12 after the review.").not(&[Phone]),
        t("phone_long_number_no", "Order 1234-567-8901A was shipped with the rest.").not(&[Phone]),
        t("phone_small_numbers_no", "We sold 12 345 units in 2023 and 6 789 more this year so far.").not(&[Phone]),
        // ---------------------------------------------------------------- version_number
        t("version_v", "Upgrade to v2.3.1 before Friday.").has(&[VersionNumber]).soft_only(),
        t("version_v_two", "Requires v1.2 or later.").has(&[VersionNumber]),
        t("version_semver", "serde 1.0.197 fixed it").has(&[VersionNumber, IpOrSemver]),
        t("version_prerelease", "try 2.0.0-beta.1 on staging").has(&[VersionNumber]),
        t("version_decimal_no", "Pi is roughly 3.14 and e is about 2.72 in most textbook examples.").not(&[VersionNumber, IpOrSemver]),
        t("version_section_no", "See section 2.1 for the background and section 4 for the results.").not(&[VersionNumber]),
        t("version_ip_no", "The host is 192.168.1.1 on the lan.").not(&[VersionNumber]).has(&[IpOrSemver]),
        // ---------------------------------------------------------------- hash_or_sha
        t("sha1", "Fixed in commit 3f2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a today.").has(&[HashOrSha]).soft_only(),
        t("sha256", "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855").has(&[HashOrSha]),
        t("sha_short_no", "Fixed in commit 3f2a1b9 today, see the log for more context on the change.").not(&[HashOrSha]),
        t("sha_too_long_no", format!("blob {}", "ab12".repeat(20))).not(&[HashOrSha]),
        t("sha_digits_only_no", "id 1234567890123456789012345678901234567890 is a number").not(&[HashOrSha]),
        // ---------------------------------------------------------------- file_path
        t("path_abs", "Edit /etc/nginx/nginx.conf and reload.").has(&[FilePath]).soft_only(),
        t("path_home", "It lives in ~/projects/ctxpress now.").has(&[FilePath]),
        t("path_rel", "See src/classify.rs for the details.").has(&[FilePath]),
        t("path_dot", "Run ./scripts/build.sh first.").has(&[FilePath]),
        t("path_andor_no", "You can use tea and/or coffee, either/or is fine with me really.").not(&[FilePath]),
        t("path_fraction_no", "Add 1/2 cup of sugar and drive at 50 km/h on the way to the shop.").not(&[FilePath]),
        t("path_url_host_no", "Read https://example.com for more.").not(&[FilePath]),
        // ---------------------------------------------------------------- ip_or_semver
        t("ip", "Ping 10.0.0.5 to check.").has(&[IpOrSemver]).not(&[VersionNumber]),
        t("ip_dotted", "Build 4.2.17.3 is current.").has(&[IpOrSemver]),
        t("ip_two_parts_no", "It grew by 4.5 percent last year and 3.2 percent the year before.").not(&[IpOrSemver]),
        // ---------------------------------------------------------------- quoted_key
        t("quoted_key", "the payload had \"user_id\": 7 in it").has(&[QuotedKey]),
        t("quoted_key_space", "set \"max-tokens\" : 100 there").has(&[QuotedKey]),
        t("quoted_key_no", "She said \"yes\" and left; later \"no\" came back as the answer.").not(&[QuotedKey]),
        // ---------------------------------------------------------------- legal_term
        t("legal", "The licensee shall not distribute the software.").has(&[LegalTerm]).soft_only(),
        t("legal_whereas", "Whereas the parties agree as follows, notwithstanding the above.").has(&[LegalTerm]),
        t("legal_pursuant", "This is done pursuant to section 4.").has(&[LegalTerm]),
        t("legal_shallow_no", "A shallow copy shares the buffer, while a deep copy duplicates everything underneath it.").not(&[LegalTerm]).prose(),
        t("legal_here_no", "Here is where we left off, and there is more to do after lunch today.").not(&[LegalTerm]),
        // ---------------------------------------------------------------- direct_quote
        t("quote", "He wrote \"we will ship on Friday no matter what\" in the chat.").has(&[DirectQuote]).soft_only(),
        t("quote_curly", "She said \u{201c}this is the final version\u{201d} and left.").has(&[DirectQuote]),
        t("quote_guillemets", "Il a dit \u{ab}nous partirons demain matin\u{bb} hier soir.").has(&[DirectQuote]),
        t("quote_short_no", "He said \"ok\" and \"fine\" and then \"sure\" before leaving the room for the day.").not(&[DirectQuote]),
        t("quote_multiline_no", "He said \"we will\nship\" then left.").not(&[DirectQuote]),
        // ---------------------------------------------------------------- numeric_with_units
        t("units_ms", "Latency dropped to 35 ms after the change.").has(&[NumericWithUnits]).soft_only(),
        t("units_mb", "The file is 512MB uncompressed.").has(&[NumericWithUnits]),
        t("units_ghz", "A 3.2 GHz CPU is enough.").has(&[NumericWithUnits]),
        t("units_seconds", "Wait 30 seconds and retry.").has(&[NumericWithUnits]),
        t("units_celsius", "It was 21 °C outside.").has(&[NumericWithUnits]),
        t("units_apples_no", "I bought 3 apples and 2 pears at the market this morning for the kids.").not(&[NumericWithUnits]).prose(),
        t("units_page_no", "Turn to page 5 and read until chapter 7 before the next session with the group.").not(&[NumericWithUnits]),
        t("units_year_no", "In 2019 we had 40 people on the team and in 2020 we had 55 of them.").not(&[NumericWithUnits]),
        // ---------------------------------------------------------------- tiers
        t("tier_t2", "Sounds good, thanks for the update.").tier(Tier::T2),
        t("tier_t2_nineteen", "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen").tier(Tier::T2),
        t("tier_t3_twenty", "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty").tier(Tier::T3),
        t("tier_empty", "").tier(Tier::T2),
        t("tier_whitespace", "   \n\t  ").tier(Tier::T2),
        t("tier_t0_soft", "see https://example.com").tier(Tier::T0).soft_only(),
        // ---------------------------------------------------------------- multilingual prose
        t("ml_en", FILLER).prose().tier(Tier::T3),
        t("ml_de", "Der schnelle braune Fuchs springt über den faulen Hund und läuft dann weit weg in den Wald, wo ihn heute niemand mehr finden kann.").prose().tier(Tier::T3),
        t("ml_fr", "Le renard brun rapide saute par-dessus le chien paresseux et court ensuite loin dans la forêt où personne ne peut le trouver aujourd'hui.").prose().tier(Tier::T3),
        t("ml_es", "El rápido zorro marrón salta sobre el perro perezoso y luego corre lejos hacia el bosque donde nadie puede encontrarlo hoy en día.").prose().tier(Tier::T3),
        t("ml_it", "La volpe marrone veloce salta sopra il cane pigro e poi corre lontano nella foresta dove nessuno riesce a trovarla oggi pomeriggio.").prose().tier(Tier::T3),
        t("ml_pt", "A rápida raposa marrom pula sobre o cão preguiçoso e depois corre para longe na floresta onde ninguém consegue encontrá-la hoje.").prose().tier(Tier::T3),
        t("ml_ru", "Быстрая коричневая лиса прыгает через ленивую собаку, а потом убегает далеко в лес, где её сегодня никто не сможет найти никогда.").prose().tier(Tier::T3),
        t("ml_pl", "Szybki brązowy lis przeskakuje nad leniwym psem, a potem ucieka daleko do lasu, gdzie nikt nie może go dzisiaj znaleźć nigdy więcej.").prose().tier(Tier::T3),
        t("ml_tr", "Hızlı kahverengi tilki tembel köpeğin üzerinden atlar ve sonra kimsenin onu bugün bulamayacağı ormanın derinliklerine doğru uzaklara koşar gider ve geri dönmez.").prose().tier(Tier::T3),
        t("ml_zh", "敏捷的棕色狐狸跳过了懒惰的狗，然后跑进了森林深处，今天没有人能够找到它。").prose().tier(Tier::T3),
        t("ml_ja", "素早い茶色の狐は怠け者の犬を飛び越えて、それから誰も見つけられない森の奥へと走って行きました。").prose().tier(Tier::T3),
        t("ml_ko", "빠른 갈색 여우가 게으른 개를 뛰어넘고 나서 오늘은 아무도 찾을 수 없는 숲 속 깊은 곳으로 멀리 달려가 버렸습니다 그리고 돌아오지 않았습니다 정말로 멀리 멀리 갔습니다 끝").prose().tier(Tier::T3),
        t("ml_ar", "الثعلب البني السريع يقفز فوق الكلب الكسول ثم يركض بعيدا في الغابة حيث لا يستطيع أحد أن يجده اليوم أو غدا أو بعد غد أبدا").prose().tier(Tier::T3),
        t("ml_hi", "तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर से कूदती है और फिर जंगल में दूर भाग जाती है जहाँ आज कोई उसे नहीं ढूंढ सकता है कभी भी").prose().tier(Tier::T3),
        t("ml_short_zh", "好的，谢谢。").tier(Tier::T2),
        t("ml_emoji", "🎉🎉 Great news everyone, the release went out this morning and the dashboards look healthy across every single region we run in 🚀").prose().tier(Tier::T3),
        // ---------------------------------------------------------------- markdown
        t("md_list", "Here is the plan:\n\n- Update the parser to handle nested lists\n- Add tests for the edge cases we found\n- Write the release notes for the next version\n- Ask the team for a review before merging").prose(),
        t("md_numbered", "Steps we agreed on:\n\n1. Reproduce the bug on a clean machine\n2. Bisect the history to find the change\n3. Write a regression test before fixing it\n4. Ship the fix with a short changelog entry").prose(),
        t("md_headings", "## Summary\n\nThe migration went well overall and nobody noticed any downtime during the switch.\n\n## Next steps\n\nWe will remove the old tables next week after one more backup.").prose(),
        t("md_emphasis", "This is **really** important: the *old* endpoint goes away next month, so please move your integrations to the new one soon.").not(&[HighSpecialCharRatio]).soft_only(),
        t("md_table_wide", "| Feature | Status | Owner | Notes |\n|---|---|---|---|\n| Parser | done | Alice | merged |\n| Docs | todo | Bob | next |").has(&[HighSpecialCharRatio]),
        t("md_link", "Read the [migration guide](https://example.com/guide) before upgrading your cluster this week.").has(&[Url]).soft_only(),
        t("md_blockquote", "> The best way to predict the future is to invent it, someone once said at a conference long ago.\n\nI agree with that sentiment more and more.").prose(),
        // ---------------------------------------------------------------- CSS class lists
        t("css_bem", "Use class=\"btn-primary--large__icon-wrapper-element nav-item__link--active-state-highlighted\" on the button.").not(&[ApiKey]),
        t("css_tailwind", "<div class=\"flex items-center justify-between px-4 py-2 bg-gray-100 hover:bg-gray-200 text-sm font-medium\">").not(&[ApiKey]),
        t("css_kebab_long", "The component-library-button-primary-variant-outline class and the layout-grid-container-responsive-wrapper class.").not(&[ApiKey]),
        t("css_selectors", ".card__header--collapsed { display: none; }\n.card__body--expanded-with-border { padding: 8px; }").not(&[ApiKey]),
        // ---------------------------------------------------------------- logs
        t("log_lines", "2024-01-01 12:00:00 INFO Starting server on port 8080\n2024-01-01 12:00:01 WARN Slow response from db took 1200ms\n2024-01-01 12:00:02 ERROR Connection refused to 10.0.0.5:5432\n2024-01-01 12:00:03 INFO Retrying in 5 seconds").not(&[VersePattern, SqlContent, ApiKey, ErrorTraceback]).has(&[IpOrSemver]),
        t("log_json_lines", "{\"level\":\"info\",\"msg\":\"started\"}\n{\"level\":\"warn\",\"msg\":\"slow\"}").has(&[JsonStructure]),
        t("log_nginx", "127.0.0.1 - - [10/Oct/2023:13:55:36 +0000] \"GET /index.html HTTP/1.1\" 200 2326").has(&[IpOrSemver]).not(&[ApiKey, SqlContent]),
        // ---------------------------------------------------------------- chat prose with SQL words
        t("chat_sql_1", "Could you select a few examples where the model failed and update the sheet when you have time?").not(&[SqlContent]).prose(),
        t("chat_sql_2", "I want to join the team from the start of next month and create a table of the tasks we have.").not(&[SqlContent]).prose(),
        t("chat_sql_3", "We should group by topic when we order by date, otherwise the report is hard to read for managers.").not(&[SqlContent]).prose(),
        t("chat_sql_4", "Delete from the draft everything where the tone is too harsh, and insert into the intro a friendlier note.").not(&[SqlContent]).prose(),
        t("chat_sql_5", "My manager asked me to learn SQL, especially how SELECT statements work, before the new project starts.").not(&[SqlContent]).prose(),
        // ---------------------------------------------------------------- misc realistic
        t("grep_output", "src/lib.rs:12:    pub fn classify(text: &str) -> Classification {\nsrc/rules.rs:40:pub fn decide(conv: &Conversation) {").has(&[FilePath]).not(&[ApiKey]),
        t("python_code_unfenced", "def main():\n    x = compute(1, 2)\n    print(x)\n    return x").not(&[ApiKey, SqlContent]),
        // spec 001: a greeting and sign-off around one long line exceed CV 1.2 over 4 lines
        t("email_reply", "Hi Sam,\n\nThanks for sending the draft over. I read it on the train and I think the structure works, but the second section could be shorter.\n\nBest,\nKim").not(&[VersePattern, YamlStructure]).has(&[HighLineLengthVariance]),
        t("email_reply_paragraphs", "Hi Sam, thanks for sending the draft over yesterday evening.\n\nI read it on the train and I think the structure works, but the second section could be shorter.\n\nBest wishes from all of us, Kim").not(&[VersePattern, YamlStructure]).prose(),
        t("plain_question", "How do I make my sourdough starter more active when the kitchen is cold during the winter months?").prose(),
        t("plain_answer", "Keep it somewhere warmer, like near the oven light, and feed it twice a day with equal weights of flour and water until it doubles reliably.").prose(),
    ];

    // ---------------------------------------------------------------- API keys: one positive per provider
    let keys: [(&'static str, &'static str); 23] = [
        ("key_openai", "sk-4fG7hJ2kL9mN3pQ6rS8tV1wX5yZ0aB7c"),
        (
            "key_openai_proj",
            "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
        ),
        (
            "key_anthropic",
            "sk-ant-api03-Xy7Zq2Wv9Ut4Sr1Qp6On3Ml8Kj5Ih0Gf",
        ),
        ("key_aws", "AKIAIOSFODNN7EXAMPLE"),
        ("key_github_ghp", "ghp_1A2b3C4d5E6f7G8h9I0j1K2l3M4n5O6p7Q8r"),
        ("key_github_gho", "gho_16C7e42F292c6912E7710c838347Ae178B4a"),
        ("key_github_ghs", "ghs_16C7e42F292c6912E7710c838347Ae178B4a"),
        ("key_github_ghr", "ghr_16C7e42F292c6912E7710c838347Ae178B4a"),
        ("key_github_ght", "ght_16C7e42F292c6912E7710c838347Ae178B4a"),
        (
            "key_github_pat",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789",
        ),
        ("key_stripe_sk_live", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
        ("key_stripe_sk_test", "sk_test_4eC39HqLyjWDarjtT1zdp7dc"),
        ("key_stripe_rk_live", "rk_live_4eC39HqLyjWDarjtT1zdp7dc"),
        ("key_stripe_rk_test", "rk_test_4eC39HqLyjWDarjtT1zdp7dc"),
        (
            "key_slack_xoxb",
            "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        ),
        (
            "key_slack_xoxp",
            "xoxp-123456789012-1234567890123-AbCdEfGhIjKl",
        ),
        (
            "key_sendgrid",
            "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",
        ),
        ("key_gitlab", "glpat-xY7zQ2wV9uT4sR1qP6oN"),
        ("key_npm", "npm_AbCdEf0123456789GhIjKl0123456789MnOp"),
        ("key_google", "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI"),
        ("key_generic", "zk_9fK2mQ7xR4tB8wN1pL6vC3jH5d"),
        ("key_generic_dash", "myapp-Q7xR4tB8wN1pL6vC3jH5d9fK2m"),
        (
            "key_in_env",
            "OPENAI_API_KEY=sk-4fG7hJ2kL9mN3pQ6rS8tV1wX5yZ0aB7c",
        ),
    ];
    for (name, key) in keys {
        v.push(
            t(
                name,
                format!("Here is the token {key} for the staging environment."),
            )
            .has(&[ApiKey]),
        );
    }
    // ---------------------------------------------------------------- API keys: near misses
    let near: [(&'static str, &'static str); 18] = [
        ("nokey_sk_words", "sk-this-is-not-a-real-key-at-all-really"),
        ("nokey_sklearn", "sk-learn"),
        ("nokey_akia_short", "AKIA1234"),
        ("nokey_akia_lower", "AKIAiosfodnn7example"),
        ("nokey_ghp_short", "ghp_short"),
        ("nokey_stripe_short", "sk_live_abc"),
        ("nokey_xox_short", "xoxb-12"),
        ("nokey_sg_words", "SG.is.the.abbreviation"),
        ("nokey_glpat_short", "glpat-abc"),
        ("nokey_npm_script", "npm_config_registry"),
        ("nokey_aiza_short", "AIzaShort"),
        ("nokey_bem", "btn-primary--large__icon-wrapper-element"),
        ("nokey_uuid", "550e8400-e29b-41d4-a716-446655440000"),
        ("nokey_identifier", "my_VeryLongFunctionNameForTesting2024"),
        ("nokey_toolu", "toolu_01D7FLrfh4GqXx9kQz2Wv8Yb"),
        ("nokey_call", "call_9hK2mQ7xR4tB8wN1pL6vC3jH"),
        ("nokey_snake", "test_parse_nested_lists_with_unicode_input"),
        ("nokey_risk", "risk-averse"),
    ];
    for (name, word) in near {
        v.push(
            t(
                name,
                format!("Here is the value {word} for the staging environment."),
            )
            .not(&[ApiKey]),
        );
    }
    v
}

#[test]
fn labelled_cases() {
    let cases = cases();
    assert!(cases.len() >= 200, "only {} cases", cases.len());
    let mut names = std::collections::HashSet::new();
    let mut failures = Vec::new();
    for c in &cases {
        assert!(names.insert(c.name), "duplicate case name {}", c.name);
        assert!(
            !c.has.is_empty() || !c.not.is_empty() || c.tier.is_some() || c.no_hard || c.plain,
            "case {} asserts nothing",
            c.name
        );
        let got = classify(&c.text);
        let all: Vec<Reason> = got.hard.iter().chain(&got.soft).copied().collect();
        let mut bad = Vec::new();
        for r in &c.has {
            if !all.contains(r) {
                bad.push(format!("missing {}", r.as_str()));
            }
        }
        for r in &c.not {
            if all.contains(r) {
                bad.push(format!("unexpected {}", r.as_str()));
            }
        }
        if let Some(tier) = c.tier
            && got.tier != tier
        {
            bad.push(format!("tier {:?} != {:?}", got.tier, tier));
        }
        if c.no_hard && !got.hard.is_empty() {
            bad.push("unexpected hard reasons".into());
        }
        if c.plain && (got.tier == Tier::T0 || !all.is_empty()) {
            bad.push("expected plain prose".into());
        }
        if !bad.is_empty() {
            failures.push(format!("{}: {} (got {:?})", c.name, bad.join(", "), got));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
