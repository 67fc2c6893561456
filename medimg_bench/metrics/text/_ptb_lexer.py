"""A pure-Python re-implementation of the rules of Stanford CoreNLP 3.4.1's ``PTBLexer`` (the
tokenizer inside ``stanford-corenlp-3.4.1.jar`` that pycocoevalcap runs), with the options that
``PTBTokenizer -preserveLines -lowerCase`` sets: ``tokenizeNLs`` on, every PTB3 normalisation on
(brackets -> ``-LRB-``..., quotes -> LaTeX quotes, dashes -> ``--``, ``...``, currency, fractions),
``americanize`` off, ``splitAssimilations`` on, untokenizable characters deleted.

Written from the lexer specification (CoreNLP tag v3.4.1, ``PTBLexer.flex``) and checked token for
token against the jar (tests/metrics/text/test_tokenizers.py). The scanner follows JFlex's rules:
at each position the rule with the longest match wins (trailing context counts towards the
length), ties go to the rule listed first; the spec is case-insensitive outside character
classes. Each rule is a ``regex`` pattern matched leftmost-longest (POSIX mode).
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable
from typing import Any

NL = "\n"  # the token the lexer returns for a line break (``*NL*`` in CoreNLP)

# ---- character classes and macros (JFlex syntax turned into `regex` syntax) -----------------

_LETTER_EXTRA = (
    "\u00AD\u0237-\u024F\u02C2-\u02C5\u02D2-\u02DF\u02E5-\u02FF\u0300-\u036F\u0370-\u037D\u0384"
    "\u0385\u03CF\u03F6\u03FC-\u03FF\u0483-\u0487\u04CF\u04F6-\u04FF\u0510-\u0525\u055A-\u055F"
    "\u0591-\u05BD\u05BF\u05C1\u05C2\u05C4\u05C5\u05C7\u0615-\u061A\u063B-\u063F\u064B-\u065E"
    "\u0670\u06D6-\u06EF\u06FA-\u06FF\u070F\u0711\u0730-\u074F\u0750-\u077F\u07A6-\u07B1"
    "\u07CA-\u07F5\u07FA\u0900-\u0903\u093C\u093E-\u094E\u0951-\u0955\u0962-\u0963\u0981-\u0983"
    "\u09BC-\u09C4\u09C7\u09C8\u09CB-\u09CD\u09D7\u09E2\u09E3\u0A01-\u0A03\u0A3C\u0A3E-\u0A4F"
    "\u0A81-\u0A83\u0ABC-\u0ACF\u0B82\u0BBE-\u0BC2\u0BC6-\u0BC8\u0BCA-\u0BCD\u0C01-\u0C03"
    "\u0C3E-\u0C56\u0D3E-\u0D44\u0D46-\u0D48\u0E30-\u0E3A\u0E47-\u0E4E\u0EB1-\u0EBC\u0EC8-\u0ECD"
)
_MISC = (
    "+%&~\\^|\\\\\u00A6\u00A7\u00A8\u00A9\u00AC\u00AE\u00AF\u00B0-\u00B3\u00B4-\u00BA\u00D7\u00F7"
    "\u0387\u05BE\u05C0\u05C3\u05C6\u05F3\u05F4\u0600-\u0603\u0606-\u060A\u060C\u0614\u061B\u061E"
    "\u066A\u066D\u0703-\u070D\u07F6\u07F7\u07F8\u0964\u0965\u0E4F\u1FBD\u2016\u2017\u2020-\u2023"
    "\u2030-\u2038\u203B\u203E-\u2042\u2044\u207A-\u207F\u208A-\u208E\u2100-\u214F\u2190-\u21FF"
    "\u2200-\u2BFF\u3012\u30FB\uFF01-\uFF0F\uFF1A-\uFF20\uFF3B-\uFF40\uFF5B-\uFF65"
)

M: dict[str, str] = {}
M["SGML"] = (
    r"<(?:[!?][A-Za-z\-][^>\r\n]*|[A-Za-z][A-Za-z0-9_:.\-]*(?:[ ]+(?:[A-Za-z][A-Za-z0-9_:.\-]*|"
    r"[A-Za-z][A-Za-z0-9_:.\-]*[ ]*=[ ]*(?:'[^']*'|\"[^\"]*\")))*[ ]*/?|/[A-Za-z][A-Za-z0-9_:.\-]*)[ ]*>"
)
M["SPMDASH"] = r"(?:&(?:MD|mdash|ndash);|[\u0096\u0097\u2013\u2014\u2015])"
M["SPAMP"] = r"&amp;"
M["SPPUNC"] = r"&(?:HT|TL|UR|LR|QC|QL|QR|odq|cdq|#[0-9]+);"
M["SPLET"] = r"&[aeiouAEIOU](?:acute|grave|uml);"
M["SPACE"] = r"[ \t\u00A0\u2000-\u200A\u3000]"
M["NEWLINE"] = r"(?:\r|\r?\n|\u2028|\u2029|\u000B|\u000C|\u0085)"
M["SPACENL"] = f"(?:{M['SPACE']}|{M['NEWLINE']})"
M["SPACENLS"] = f"(?:{M['SPACENL']})+"
M["SENTEND"] = f"{M['SPACENL']}(?:{M['SPACENL']}|\\p{{Lu}}|{M['SGML']})"
M["DIGIT"] = r"[\p{Nd}\u07C0-\u07C9]"
D = M["DIGIT"]
M["DATE"] = f"{D}{{1,2}}[\\-/]{D}{{1,2}}[\\-/]{D}{{2,4}}"
M["NUM"] = f"(?:{D}+|{D}*(?:[.:,\u00AD\u066B\u066C]{D}+)+)"
M["NUMBER"] = f"[\\-+]?{M['NUM']}"
M["SUBSUPNUM"] = r"[\u207A\u207B\u208A\u208B]?(?:[\u2070\u00B9\u00B2\u00B3\u2074-\u2079]+|[\u2080-\u2089]+)"
M["FRAC"] = f"(?:{D}{{1,4}}[\\- \u00A0])?{D}{{1,4}}(?:\\\\?/|\u2044){D}{{1,4}}"
M["FRAC2"] = r"[\u00BC\u00BD\u00BE\u2153-\u215E]"
M["DOLSIGN"] = r"(?:[A-Z]*\$|#)"
M["DOLSIGN2"] = (
    r"[\u00A2\u00A3\u00A4\u00A5\u0080\u20A0\u20AC\u060B\u0E3F\u20A4\uFFE0\uFFE1\uFFE5\uFFE6]"
)
M["LETTER"] = f"(?:\\p{{L}}|{M['SPLET']}|[{_LETTER_EXTRA}])"
L = M["LETTER"]
M["WORD"] = f"{L}(?:{L}|{D})*(?:[.!?]{L}(?:{L}|{D})*)*"
M["FILENAME_EXT"] = (
    "(?:bat|bmp|c|class|cgi|cpp|dll|doc|docx|exe|gif|gz|h|htm|html|jar|java|jpeg|jpg|mov|mp3|pdf|"
    "php|pl|png|ppt|ps|py|sql|tar|txt|wav|x|xml|zip)"
)
M["FILENAME"] = f"(?:{L}|{D})+(?:[.](?:{L}|{D})+)*(?:[.]{M['FILENAME_EXT']})"
M["APOS"] = r"(?:['\u0092\u2019]|&apos;)"
M["APOSETCETERA"] = f"(?:{M['APOS']}|[`\u0091\u2018\u201B])"
M["HYPHEN"] = r"[\-_\u058A\u2010\u2011]"
_LD = r"[\p{L}\p{Nd}]"
_THING_PART = f"(?:[dDoOlL]{M['APOSETCETERA']}{_LD})?{_LD}+"
M["THING"] = f"{_THING_PART}(?:{M['HYPHEN']}{_THING_PART})*"
M["THINGA"] = r"[A-Z]+(?:(?:[+&]|&amp;)[A-Z]+)+"
M["THING3"] = r"[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}(?:\\?/[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}){1,2}"
M["ACRO"] = r"(?:[A-Za-z](?:\.[A-Za-z])*|(?:Canada|Sino|Korean|EU|Japan|non)-U\.S|U\.S\.-(?:U\.K|U\.S\.S\.R))"
M["ACRO2"] = r"(?:[A-Za-z](?:\.[A-Za-z])+|(?:Canada|Sino|Korean|EU|Japan|non)-U\.S|U\.S\.-(?:U\.K|U\.S\.S\.R))"
M["HTHING"] = f"[A-Za-z0-9][A-Za-z0-9.,\u00AD]*(?:-(?:[A-Za-z0-9\u00AD]+|{M['ACRO2']}\\.))+"
M["REDAUX"] = f"{M['APOS']}(?:[msdMSD]|re|ve|ll)"
M["SWORD"] = r"[A-Za-z\u00AD]*[A-MO-Za-mo-z]\u00AD*"
M["SREDAUX"] = f"n{M['APOSETCETERA']}t"
_A, _AE = M["APOS"], M["APOSETCETERA"]
M["APOWORD"] = (
    f"(?:{_A}n{_A}?|[lLdDjJ]{_A}|Dunkin{_A}|somethin{_A}|ol{_A}|{_A}em|"
    f"[A-HJ-XZn]{_AE}\\p{{L}}{{2}}\\p{{L}}*|{_A}[2-9]0s|{_A}till?|"
    f"\\p{{L}}\\p{{L}}*[aeiouyAEIOUY]{_AE}[aeiouA-Z]\\p{{L}}*|{_A}cause|cont'd)"
)
M["APOWORD2"] = f"y{_A}"
M["FULLURL"] = r"https?://[^ \t\n\f\r\"<>|(){}]+[^ \t\n\f\r\"<>|.!?(){},\-]"
# `,-_` in this class is a range in the spec (0x2C-0x5F: digits, upper case, ':' and '/' too)
M["LIKELYURL"] = (
    r"(?:(?:www\.(?:[^ \t\n\f\r\"<>|.!?(){},]+\.)+[a-zA-Z]{2,4})|(?:(?:[^ \t\n\f\r\"`'<>|.!?(){}\x2C-\x5F$]+\.)+"
    r"(?:com|net|org|edu)))(?:/[^ \t\n\f\r\"<>|()]+[^ \t\n\f\r\"<>|.!?(){},\-])?"
)
M["EMAIL"] = (
    r"(?:&lt;|<)?[a-zA-Z0-9][^ \t\n\f\r\"<>|()\u00A0{}]*@(?:[^ \t\n\f\r\"<>|(){}.\u00A0]+\.)*"
    r"(?:[^ \t\n\f\r\"<>|(){}.\u00A0]+)(?:&gt;|>)?"
)
M["TWITTER"] = f"(?:@[a-zA-Z_][a-zA-Z_0-9]*|#{L}+)"
M["ABMONTH"] = "(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)"
M["ABDAYS"] = "(?:Mon|Tue|Tues|Wed|Thu|Thurs|Fri)"
M["ABSTATE"] = (
    "(?:Ala|Ariz|[A]z|[A]rk|Calif|Colo|Conn|Ct|Dak|[D]el|Fla|Ga|[I]ll|Ind|Kans?|Ky|[L]a|[M]ass|Md|Mich|"
    "Minn|[M]iss|Mo|Mont|Neb|Nev|Okla|[O]re|[P]a|Penn|Tenn|[T]ex|Va|Vt|[W]ash|Wisc?|Wyo)"
)
M["ABCOMP"] = "(?:Inc|Cos?|Corp|Pp?t[ye]s?|Ltd|Plc|Rt|Bancorp|Bhd|Assn|Univ|Intl|Sys)"
M["ABNUM"] = "(?:tel|est|ext|sq)"
M["ABPTIT"] = r"(?:Jr|Sr|Bros|(?:Ed|Ph)\.D|Blvd|Rd|Esq)"
M["ABBREV1"] = (
    f"(?:{M['ABMONTH']}|{M['ABDAYS']}|{M['ABSTATE']}|{M['ABCOMP']}|{M['ABNUM']}|{M['ABPTIT']}"
    r"|etc|al|seq|Bldg)\."
)
M["ABTITLE"] = (
    "(?:Mr|Mrs|Ms|[M]iss|Drs?|Profs?|Sens?|Reps?|Attys?|Lt|Col|Gen|Messrs|Govs?|Adm|Rev|Maj|Sgt|Cpl|"
    "Pvt|Capt|Ste?|Ave|Pres|Lieut|Hon|Brig|Co?mdr|Pfc|Spc|Supts?|Det|Mt|Ft|Adj|Adv|Asst|Assoc|Ens|"
    "Insp|Mlle|Mme|Msgr|Sfc)"
)
M["ABCOMP2"] = "(?:Invt|Elec|Natl|M[ft]g|Dept)"
M["ABBREV4"] = (
    f"(?:{M['ABTITLE']}|vs|Alex|Wm|Jos|Cie|a\\.k\\.a|cf|TREAS|Ph|{M['ACRO']}|{M['ABCOMP2']})"
)
M["ABBREV2"] = f"{M['ABBREV4']}\\."
M["ACRONYM"] = f"{M['ACRO']}\\."
M["ABBREV3"] = r"(?:ca|figs?|prop|nos?|art|bldg|prop|pp|op)\."
M["PHONE"] = (
    r"(?:(?:\([0-9]{2,3}\)[ \u00A0]?|(?:\+\+?)?(?:[0-9]{2,4}[\- \u00A0])?[0-9]{2,4}[\- \u00A0])"
    r"[0-9]{3,4}[\- \u00A0]?[0-9]{3,5}|(?:(?:\+\+?)?[0-9]{2,4}\.)?[0-9]{2,4}\.[0-9]{3,4}\.[0-9]{3,5})"
)
M["LDOTS"] = r"(?:\.{3,5}|(?:\.[ \u00A0]){2,4}\.|[\u0085\u2026])"
M["FNMARKS"] = "(?:@+|#+|_+)"
M["ASTS"] = r"(?:\*+|(?:\\\*){1,3})"
M["INSENTP"] = "[,;:\u3001]"
M["QUOTES"] = (
    f"(?:{M['APOS']}|''|[`\u2018\u2019\u201A\u201B\u201C\u201D\u0091\u0092\u0093\u0094\u201E\u201F"
    "\u2039\u203A\u00AB\u00BB]{1,2})"
)
M["DBLQUOT"] = '(?:"|&quot;)'
M["TBSPEC"] = (
    f"(?:-(?:RRB|LRB|RCB|LCB|RSB|LSB)-|C\\.D\\.s|pro-|anti-|S(?:&|&amp;)P-500|S(?:&|&amp;)Ls|"
    f"Cap{_A}n|c{_A}est)"
)
M["TBSPEC2"] = f"{_A}[0-9][0-9]"
M["SMILEY"] = r"[<>]?[:;=][\-o*']?[()DPdpO\\{@|\[\]]"
M["ASIANSMILEY"] = (
    r"(?:[\^x=~<>]\.\[\^x=~<>]|[\-\^x=~<>']_[\-\^x=~<>']|\([\-\^x=~<>'][_.]?[\-\^x=~<>']\)|"
    r"\([\^x=~<>']-[\^x=~<>'`]\))"
)
M["MISCSYMBOL"] = f"[{_MISC}]"
_ACRONYM_NEXT = (
    "(?:[A]bout|[A]ccording|[A]dditionally|[A]fter|[A]n|[A]|[A]s|[A]t|[B]ut|[E]arlier|[H]e|[H]er|"
    "[H]ere|[H]owever|[I]f|[I]n|[I]t|[L]ast|[M]any|[M]ore|[M]r\\.|[M]s\\.|[N]ow|[O]nce|[O]ne|[O]ther|"
    "[O]ur|[S]he|[S]ince|[S]o|[S]ome|[S]uch|[T]hat|[T]he|[T]heir|[T]hen|[T]here|[T]hese|[T]hey|"
    "[T]his|[W]e|[W]hen|[W]hile|[W]hat|[Y]et|[Y]ou|" + M["SGML"] + ")"
)


def _caseless(pattern: str) -> str:
    """JFlex ``%caseless``: letters outside character classes match either case."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1]
            if nxt in "pP" and pattern[i + 2] == "{":
                j = pattern.index("}", i) + 1
            elif nxt == "u":
                j = i + 6
            else:
                j = i + 2
            out.append(pattern[i:j])
            i = j
        elif c == "[":
            j = i + 1
            if pattern[j] == "^":
                j += 1
            if pattern[j] == "]":
                j += 1
            while pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            out.append(pattern[i : j + 1])
            i = j + 1
        elif c == "(" and pattern[i + 1] == "?":
            out.append(pattern[i : i + 3])  # (?: (?= (?!
            i += 3
        elif c == "{":
            j = pattern.index("}", i) + 1
            out.append(pattern[i:j])
            i = j
        elif c.isalpha() and c.lower() != c.upper():
            out.append(f"[{c.lower()}{c.upper()}]")
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


# ---- token actions --------------------------------------------------------------------------

_LEFT_SQ, _RIGHT_SQ = "\u0091\u2018\u201B\u2039", "\u0092\u2019\u203A"
_LEFT_DQ, _RIGHT_DQ = "\u0093\u201C\u00AB", "\u0094\u201D\u00BB"


def _quotes(tok: str, left: bool) -> str:
    tok = tok.replace("&apos;", "'").replace("&quot;", '"')
    tok = tok.replace("'", "`" if left else "'").replace('"', "``" if left else "''")
    for chars, rep in ((_LEFT_SQ, "`"), (_RIGHT_SQ, "'"), (_LEFT_DQ, "``"), (_RIGHT_DQ, "''")):
        for ch in chars:
            tok = tok.replace(ch, rep)
    return tok


def _soft(tok: str) -> str:
    if "\u00AD" not in tok:
        return tok
    return tok.replace("\u00AD", "") or "-"


def _amp(tok: str) -> str:
    import re

    return re.sub("(?i)&amp;", "&", tok)


def _parens(tok: str) -> str:
    return tok.replace("(", "-LRB-").replace(")", "-RRB-")


_FRACTIONS = {"\u00BC": "1/4", "\u00BD": "1/2", "\u00BE": "3/4", "\u2153": "1/3", "\u2154": "2/3"}
_CURRENCY = {"\u00A2": "cents", "\u00A3": "#", "\u0080": "$", "\u00A4": "$", "\u20A0": "$", "\u20AC": "$"}


def _strip_ws(tok: str) -> str:
    return tok.rstrip(" \t\n\u000B\u000C\r\u0085")


# An action takes the matched text (without trailing context) and returns
# (token or None to skip, number of characters consumed).
Action = Callable[[str], "tuple[str | None, int]"]


def _keep(fn: Callable[[str], str] = lambda t: t) -> Action:
    return lambda t: (fn(t), len(t))


def _pushback(k: int) -> Action:
    return lambda t: (t[: len(t) - k], len(t) - k)


def _skip(t: str) -> tuple[None, int]:
    return None, len(t)


def _acronym(t: str) -> tuple[str, int]:
    t = _strip_ws(t)
    if len(t) == 2:  # "I." -> "I", then "."
        return t[:1], 1
    return t, len(t) - 1  # the word with its period, and the period again


def _abbrev1(t: str) -> tuple[str, int]:
    return t, len(t) - 1  # the word with its period, and the period again


def _hyphens(t: str) -> tuple[str, int]:
    return ("--" if 3 <= len(t) <= 4 else t), len(t)


# (pattern, trailing context or None, action); the order is the spec's rule order.
_RULES_SRC: list[tuple[str, str | None, Action]] = [
    (r"c[+][+]", None, _keep()),
    (r"(?:c|f)#", None, _keep()),
    (r"cannot", None, _pushback(3)),
    (r"'twas", None, _pushback(3)),
    (r"'tis", None, _pushback(2)),
    (r"(?:gonna|gotta|lemme|gimme|wanna)", None, _pushback(2)),
    (M["SGML"], None, _keep(lambda t: t.replace(" ", "\u00A0"))),
    (M["SPMDASH"], None, _keep(lambda t: "--")),
    (M["SPAMP"], None, _keep(_amp)),
    (M["SPPUNC"], None, _keep()),
    (M["WORD"], M["REDAUX"], _keep(_soft)),
    (M["SWORD"], M["SREDAUX"], _keep(_soft)),
    (M["WORD"], None, _keep(_soft)),
    (M["APOWORD"], None, _keep()),
    (M["APOWORD2"], r"\p{L}", _keep()),
    (M["FULLURL"], None, _keep()),
    (M["LIKELYURL"], None, _keep()),
    (M["EMAIL"], None, _keep()),
    (M["TWITTER"], None, _keep()),
    (M["REDAUX"], "[^A-Za-z]", _keep(lambda t: _quotes(t, False))),
    (M["SREDAUX"], "[^A-Za-z]", _keep(lambda t: _quotes(t, False))),
    (M["DATE"], None, _keep()),
    (M["NUMBER"], None, _keep(_soft)),
    (M["SUBSUPNUM"], None, _keep()),
    (M["FRAC"], None, _keep(lambda t: t.replace(" ", "\u00A0"))),
    (M["FRAC2"], None, _keep(lambda t: _FRACTIONS.get(t, t))),
    (M["TBSPEC"], None, _keep(_amp)),
    (M["THING3"], None, _keep()),
    (M["DOLSIGN"], None, _keep()),
    (M["DOLSIGN2"], None, _keep(lambda t: _CURRENCY.get(t, t))),
    (M["ACRONYM"], f"{M['SPACENLS']}{_ACRONYM_NEXT}{M['SPACENL']}", _acronym),
    (M["ABBREV3"], f"{M['SPACENL']}?\\p{{Nd}}", lambda t: (_strip_ws(t), len(_strip_ws(t)))),
    (r"(?:pt[eyEY]|co)\.", f"{M['SPACE']}(?:ltd|lim)", _keep()),
    (M["ABBREV1"], M["SENTEND"], _abbrev1),
    (M["ABBREV1"], r"[\s\S][\s\S]", _keep()),
    (M["ABBREV1"], None, _abbrev1),
    (M["ABBREV2"], None, _keep()),
    (M["ABBREV4"], M["SPACE"], _keep()),
    (M["ACRO"], M["SPACENL"], _keep()),
    (M["TBSPEC2"], M["SPACENL"], _keep()),
    (M["FILENAME"], f"(?:{M['SPACENL']}|[.?!,])", _keep()),
    (M["WORD"] + r"\.", M["INSENTP"], _keep(_soft)),
    (M["PHONE"], None, _keep(lambda t: _parens(t.replace(" ", "\u00A0")))),
    (M["DBLQUOT"], "[A-Za-z0-9$]", _keep(lambda t: _quotes(t, True))),
    (M["DBLQUOT"], None, _keep(lambda t: _quotes(t, False))),
    ("\x7f", None, _skip),
    (r"(?:<|&lt;)", None, _keep(lambda t: "<")),
    (r"(?:>|&gt;)", None, _keep(lambda t: ">")),
    (M["SMILEY"], "[^A-Za-z0-9]", _keep(_parens)),
    (M["ASIANSMILEY"], None, _keep(_parens)),
    (r"\{", None, _keep(lambda t: "-LCB-")),
    (r"\}", None, _keep(lambda t: "-RCB-")),
    (r"\[", None, _keep(lambda t: "-LSB-")),
    (r"\]", None, _keep(lambda t: "-RSB-")),
    (r"\(", None, _keep(lambda t: "-LRB-")),
    (r"\)", None, _keep(lambda t: "-RRB-")),
    (r"-+", None, _hyphens),
    (M["LDOTS"], None, _keep(lambda t: "...")),
    (M["FNMARKS"], None, _keep()),
    (M["ASTS"], None, _keep()),
    (M["INSENTP"], None, _keep()),
    (r"[?!]+", None, _keep()),
    ("[.\u00A1\u00BF\u037E\u0589\u061F\u06D4\u0700-\u0702\u07FA\u3002]", None, _keep()),
    ("=", None, _keep()),
    ("/", None, _keep()),
    (M["HTHING"] + r"\.", M["INSENTP"], _keep(_soft)),
    (M["HTHING"], None, _keep(_soft)),
    (M["THING"] + r"\.", M["INSENTP"], _keep()),
    (M["THING"], None, _keep()),
    (M["THINGA"] + r"\.", M["INSENTP"], _keep(_amp)),
    (M["THINGA"], None, _keep(_amp)),
    ("'", r"[A-Za-z][^ \t\n\r\u00A0]", _keep(lambda t: _quotes(t, True))),
    (M["REDAUX"], None, _keep(lambda t: _quotes(t, False))),
    (M["SREDAUX"], None, _keep(lambda t: _quotes(t, False))),
    (M["QUOTES"], None, _keep(lambda t: _quotes(t, False))),
    ("(?:<<|>>)", None, _keep()),
    (M["MISCSYMBOL"], None, _keep()),
    (f"(?:\0|{M['SPACE']}+|[\u200B\u200E\u200F\uFEFF])", None, _skip),
    (M["NEWLINE"], None, _keep(lambda t: NL)),
    ("&nbsp;", None, _skip),
]


@functools.lru_cache(maxsize=1)
def _rules() -> list[tuple[Any, Action]]:
    import regex

    out = []
    for pat, ctx, action in _RULES_SRC:
        body = f"({_caseless(pat)})" + (f"(?:{_caseless(ctx)})" if ctx is not None else "")
        out.append((regex.compile("(?p)" + body, regex.V0), action))
    return out


_CANDIDATES: dict[str, list[tuple[Any, Action]]] = {}


def _candidates(key: str) -> list[tuple[Any, Action]]:
    """The rules that can match text starting with ``key`` (a partial match: exact, conservative)."""
    found = _CANDIDATES.get(key)
    if found is None:
        found = [rule for rule in _rules() if rule[0].match(key, partial=True) is not None]
        if len(_CANDIDATES) < 200_000:
            _CANDIDATES[key] = found
    return found


def next_token(text: str, pos: int, endpos: int | None = None) -> tuple[str | None, int]:
    """The token at ``pos`` (``None`` for skipped text) and the position after it. ``endpos``
    bounds what the rules may read (the regex engine otherwise scans long texts in vain)."""
    best, best_len, best_action = None, 0, None
    if endpos is None:
        endpos = len(text)
    for pattern, action in _candidates(text[pos : pos + 2]):
        m = pattern.match(text, pos, endpos)
        if m is not None and m.end() - pos > best_len:
            best, best_len, best_action = m, m.end() - pos, action
    if best is None:  # an untokenizable character (or half a surrogate pair): deleted
        return None, pos + 1
    tok, used = best_action(best.group(1))
    return tok, pos + max(used, 1)


def _scan(text: str, pos: int, stop: int, endpos: int) -> tuple[list[str], int]:
    """The tokens from ``pos`` until the scan reaches or passes ``stop`` (rules read up to
    ``endpos``), and the position after the last one."""
    out: list[str] = []
    while pos < stop:
        tok, pos = next_token(text, pos, endpos)
        if tok is not None:
            out.append(tok)
    return out, pos


def lex_uncached(text: str) -> list[str]:
    """Every token of ``text`` (line breaks as :data:`NL`), rule by rule at every position."""
    return _scan(text, 0, len(text), len(text))[0]


# ---- the fast path ---------------------------------------------------------------------------
# Text is cut at whitespace into chunks. A chunk of ASCII letters is one token (the rules that
# match such a chunk all give it whole, except the split assimilations). Any other chunk is
# scanned rule by rule from its start until the scan passes its end; its tokens are cached under
# the chunk and the text after it that a rule can read: matches that cross whitespace (fractions
# "1 1/2", phone numbers, spaced dots, SGML) and trailing contexts that look past it
# (abbreviations at a sentence end, acronyms before a capitalised word) read at most the next
# ~30 characters, except SGML, which is never cached.

_WS = " \t\n\r\u000B\u000C\u0085\u00A0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200A\u2028\u2029\u3000\u200B\u200E\u200F\uFEFF\x00\x7f"
_ASSIMILATIONS = {"cannot": ("can", "not"), "gonna": ("gon", "na"), "gotta": ("got", "ta"),
                  "lemme": ("lem", "me"), "gimme": ("gim", "me"), "wanna": ("wan", "na")}
_CHUNK_CACHE: dict[tuple[str, str], tuple[tuple[str, ...], int]] = {}
_CONTEXT = 32


@functools.lru_cache(maxsize=1)
def _patterns() -> tuple[Any, Any]:
    import re

    import regex

    tail = "|".join(M[k] for k in ("ABBREV1", "ABBREV3", "ACRONYM")) + r"|(?:pt[eyEY]|co)\."
    # a chunk ending in an abbreviation or acronym that may start a token: its tokens depend on
    # the text after it (sentence ends, capitalised words, digits)
    abbrev_tail = regex.compile(f"(?<![A-Za-z])(?:{_caseless(tail)})$")
    return re.compile(f"([^{_WS}]+)"), abbrev_tail


def _context_end(text: str, chunk: str, end: int, next_start: int, abbrev_tail: Any) -> int:
    """Where the text that can change ``chunk``'s tokens ends (see the comment above)."""
    n = len(text)
    last = chunk[-1]
    nxt = text[next_start] if next_start < n else ""
    if last == ".":
        long = nxt == "." or abbrev_tail.search(chunk) is not None
    elif last == ")" or last.isdigit():
        long = nxt.isdigit()
    else:
        long = False
    return min(n, next_start + _CONTEXT) if long else min(n, end + 2)


def lex(text: str) -> list[str]:
    """Every token of ``text`` (line breaks as :data:`NL`); equal to :func:`lex_uncached`."""
    split, abbrev_tail = _patterns()
    parts = split.split(text)  # gap, chunk, gap, chunk, ..., gap
    out: list[str] = []
    append = out.append
    n = len(text)
    pos = cur = 0  # pos: where scanning goes on; cur: where parts[i] starts
    cache = _CHUNK_CACHE
    for i, part in enumerate(parts):
        start, cur = cur, cur + len(part)
        if cur <= pos or not part:
            continue  # consumed by a match that ran over whitespace
        if i % 2 == 0 or start < pos:  # whitespace, or the rest of a chunk a match ran into
            if part == " " and start == pos:
                pos = cur
                continue
            if part == "\n" and start == pos:
                append(NL)
                pos = cur
                continue
            toks, pos = _scan(text, pos, cur, min(n, cur + _CONTEXT) if i % 2 == 0 else n)
            out.extend(toks)
            continue
        if part.isalpha() and part.isascii():
            if len(part) in (5, 6) and part.lower() in _ASSIMILATIONS:
                first = len(_ASSIMILATIONS[part.lower()][0])
                out.extend((part[:first], part[first:]))
            else:
                append(part)
            pos = cur
            continue
        next_start = cur + len(parts[i + 1]) if i + 1 < len(parts) else n
        limit = _context_end(text, part, cur, next_start, abbrev_tail)
        context = text[cur:limit]
        sgml = "<" in part or "<" in context  # SGML tags may run on: read to the end, no cache
        key = (part, context)
        hit = None if sgml else cache.get(key)
        if hit is None:
            toks, p = _scan(text, pos, cur, n if sgml else min(n, limit + _CONTEXT))
            hit = (tuple(toks), p - pos)
            if not sgml and len(cache) < 500_000:
                cache[key] = hit
        out.extend(hit[0])
        pos += hit[1]
    return out


def char_is_letter(c: str) -> bool:
    """JFlex ``[:letter:]`` (Java ``Character.isLetter``)."""
    return unicodedata.category(c).startswith("L")
