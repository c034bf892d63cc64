package streamops.peer;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.math.RoundingMode;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * Python's {@code json.loads} (CPython 3.11's C scanner, strict mode) and {@code repr(float)}, as far as
 * jobs/demo/fold.validate and the profile JSON need them:
 *
 * <ul>
 *   <li>text: strict UTF-8 (no BOM stripping; a leading U+FEFF is an error, as in json.loads);
 *   <li>whitespace: only space, tab, LF, CR; one value, then only whitespace;
 *   <li>the literals {@code NaN}, {@code Infinity}, {@code -Infinity} are numbers;
 *   <li>numbers: {@code -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?}; a fraction or exponent makes a
 *       float (a double, correctly rounded, overflow to infinity), else an int of any size (Long when it
 *       fits, else BigInteger), but more than 4300 digits is an error (Python's int_max_str_digits);
 *   <li>strings: no raw control characters below U+0020, escapes {@code \" \\ \/ \b \f \n \r \t \\uXXXX}
 *       (lone surrogates kept);
 *   <li>objects: duplicate keys, the last wins;
 *   <li>nesting deeper than {@link #MAX_DEPTH} is an error (Python's RecursionError; its exact depth depends
 *       on the caller's stack, about 990 from a shallow caller: the one case not mirrored exactly).
 * </ul>
 *
 * Only the top-level object is kept as a map: nested arrays and objects are checked and returned as
 * {@link #ARRAY} / {@link #OBJECT} (validate only asks whether a field is a string or a number).
 */
final class PyJson {
    private PyJson() {}

    /** Not valid JSON for Python (no stack trace: it is the common case of a bad record). */
    static final class Invalid extends Exception {
        Invalid() {
            super(null, null, false, false);
        }
    }

    static final Invalid INVALID = new Invalid();
    static final int MAX_DEPTH = 990;
    static final int MAX_INT_DIGITS = 4300;

    /** JSON null. */
    static final Object NULL = new Object();
    /** Any array. */
    static final Object ARRAY = new Object();
    /** Any object below the top level. */
    static final Object OBJECT = new Object();

    /** A Python float: its value and the JSON text it came from (null for NaN/Infinity). */
    record PyFloat(double value, String text) {}

    // -- UTF-8 ----------------------------------------------------------------------------------------------
    private static final ThreadLocal<CharsetDecoder> UTF8 = ThreadLocal.withInitial(() -> StandardCharsets.UTF_8
            .newDecoder().onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT));

    /** {@code bytes.decode("utf-8")}: strict (malformed, overlong, surrogates and > U+10FFFF are errors). */
    static String decodeUtf8(byte[] value) throws Invalid {
        boolean ascii = true;
        for (byte b : value) {
            if (b < 0) {
                ascii = false;
                break;
            }
        }
        if (ascii) {
            return new String(value, StandardCharsets.ISO_8859_1);
        }
        try {
            CharBuffer chars = UTF8.get().reset().decode(ByteBuffer.wrap(value));
            return chars.toString();
        } catch (CharacterCodingException e) {
            throw INVALID;
        }
    }

    // -- json.loads -----------------------------------------------------------------------------------------
    static Object loads(String s) throws Invalid {
        if (!s.isEmpty() && s.charAt(0) == '\ufeff') {
            throw INVALID; // json.loads: "Unexpected UTF-8 BOM"
        }
        Parser p = new Parser(s);
        p.ws();
        Object v = p.value(0, true);
        p.ws();
        if (p.i != p.n) {
            throw INVALID; // "Extra data"
        }
        return v;
    }

    private static final class Parser {
        final String s;
        final int n;
        int i;

        Parser(String s) {
            this.s = s;
            this.n = s.length();
        }

        void ws() {
            while (i < n) {
                char c = s.charAt(i);
                if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                    return;
                }
                i++;
            }
        }

        void literal(String word) throws Invalid {
            if (!s.startsWith(word, i)) {
                throw INVALID;
            }
            i += word.length();
        }

        Object value(int depth, boolean top) throws Invalid {
            if (i >= n) {
                throw INVALID;
            }
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    i++;
                    return string();
                case '{':
                    return object(depth + 1, top);
                case '[':
                    return array(depth + 1);
                case 'n':
                    literal("null");
                    return NULL;
                case 't':
                    literal("true");
                    return Boolean.TRUE;
                case 'f':
                    literal("false");
                    return Boolean.FALSE;
                case 'N':
                    literal("NaN");
                    return new PyFloat(Double.NaN, null);
                case 'I':
                    literal("Infinity");
                    return new PyFloat(Double.POSITIVE_INFINITY, null);
                case '-':
                    if (s.startsWith("-Infinity", i)) {
                        i += 9;
                        return new PyFloat(Double.NEGATIVE_INFINITY, null);
                    }
                    return number();
                default:
                    return number();
            }
        }

        private static boolean digit(char c) {
            return c >= '0' && c <= '9';
        }

        Object number() throws Invalid {
            int start = i;
            if (i < n && s.charAt(i) == '-') {
                i++;
            }
            if (i < n && s.charAt(i) == '0') {
                i++;
            } else if (i < n && s.charAt(i) >= '1' && s.charAt(i) <= '9') {
                i++;
                while (i < n && digit(s.charAt(i))) {
                    i++;
                }
            } else {
                throw INVALID;
            }
            int intEnd = i;
            boolean isFloat = false;
            if (i + 1 < n && s.charAt(i) == '.' && digit(s.charAt(i + 1))) {
                i += 2;
                while (i < n && digit(s.charAt(i))) {
                    i++;
                }
                isFloat = true;
            }
            if (i < n && (s.charAt(i) == 'e' || s.charAt(i) == 'E')) {
                int eStart = i;
                i++;
                if (i < n && (s.charAt(i) == '-' || s.charAt(i) == '+')) {
                    i++;
                }
                int digits = i;
                while (i < n && digit(s.charAt(i))) {
                    i++;
                }
                if (i > digits) {
                    isFloat = true;
                } else {
                    i = eStart; // backtrack: the 'e' is not part of the number
                }
            }
            String text = s.substring(start, i);
            if (isFloat) {
                return new PyFloat(Double.parseDouble(text), text);
            }
            int ndigits = intEnd - start - (s.charAt(start) == '-' ? 1 : 0);
            if (ndigits > MAX_INT_DIGITS) {
                throw INVALID; // ValueError: Exceeds the limit (4300 digits) for integer string conversion
            }
            if (ndigits <= 18) {
                return Long.parseLong(text);
            }
            BigInteger big = new BigInteger(text);
            return big.bitLength() < 64 ? (Object) big.longValue() : big;
        }

        String string() throws Invalid {
            int start = i;
            StringBuilder sb = null;
            while (true) {
                if (i >= n) {
                    throw INVALID; // unterminated
                }
                char c = s.charAt(i);
                if (c == '"') {
                    String out = sb == null ? s.substring(start, i) : sb.append(s, start, i).toString();
                    i++;
                    return out;
                }
                if (c < 0x20) {
                    throw INVALID; // "Invalid control character"
                }
                if (c != '\\') {
                    i++;
                    continue;
                }
                if (sb == null) {
                    sb = new StringBuilder();
                }
                sb.append(s, start, i);
                i++;
                if (i >= n) {
                    throw INVALID;
                }
                char e = s.charAt(i);
                switch (e) {
                    case '"': sb.append('"'); break;
                    case '\\': sb.append('\\'); break;
                    case '/': sb.append('/'); break;
                    case 'b': sb.append('\b'); break;
                    case 'f': sb.append('\f'); break;
                    case 'n': sb.append('\n'); break;
                    case 'r': sb.append('\r'); break;
                    case 't': sb.append('\t'); break;
                    case 'u': {
                        if (i + 4 >= n) {
                            throw INVALID;
                        }
                        int code = 0;
                        for (int k = 1; k <= 4; k++) {
                            int h = Character.digit(s.charAt(i + k), 16);
                            char hc = s.charAt(i + k);
                            if (h < 0 || hc > 'f') { // ASCII hex digits only
                                throw INVALID;
                            }
                            code = (code << 4) | h;
                        }
                        // a surrogate pair \\uD8xx\\uDCxx is two UTF-16 units, as Python joins them
                        sb.append((char) code);
                        i += 4;
                        break;
                    }
                    default:
                        throw INVALID;
                }
                i++;
                start = i;
            }
        }

        Object object(int depth, boolean top) throws Invalid {
            if (depth > MAX_DEPTH) {
                throw INVALID;
            }
            i++;
            Map<String, Object> map = top ? new HashMap<>(8) : null;
            ws();
            if (i < n && s.charAt(i) == '}') {
                i++;
                return top ? map : OBJECT;
            }
            while (true) {
                if (i >= n || s.charAt(i) != '"') {
                    throw INVALID;
                }
                i++;
                String key = string();
                ws();
                if (i >= n || s.charAt(i) != ':') {
                    throw INVALID;
                }
                i++;
                ws();
                Object v = value(depth, false);
                if (map != null) {
                    map.put(key, v);
                }
                ws();
                if (i < n && s.charAt(i) == '}') {
                    i++;
                    return top ? map : OBJECT;
                }
                if (i >= n || s.charAt(i) != ',') {
                    throw INVALID;
                }
                i++;
                ws();
            }
        }

        Object array(int depth) throws Invalid {
            if (depth > MAX_DEPTH) {
                throw INVALID;
            }
            i++;
            ws();
            if (i < n && s.charAt(i) == ']') {
                i++;
                return ARRAY;
            }
            while (true) {
                value(depth, false);
                ws();
                if (i < n && s.charAt(i) == ']') {
                    i++;
                    return ARRAY;
                }
                if (i >= n || s.charAt(i) != ',') {
                    throw INVALID;
                }
                i++;
                ws();
            }
        }
    }

    // -- repr(float) ----------------------------------------------------------------------------------------
    /**
     * The decimal value of Python's {@code repr(d)} for a finite d: the shortest decimal that reads back as
     * d, the closest to d among those (David Gay's mode 0, as CPython's float repr).
     */
    static BigDecimal shortest(double d) {
        if (d == 0) {
            return BigDecimal.ZERO;
        }
        BigDecimal exact = new BigDecimal(d);
        for (int p = 1; p <= 17; p++) {
            BigDecimal near = exact.round(new MathContext(p, RoundingMode.HALF_EVEN));
            if (readsBack(near, d)) {
                return near;
            }
            for (RoundingMode mode : new RoundingMode[] {RoundingMode.DOWN, RoundingMode.UP}) {
                BigDecimal c = exact.round(new MathContext(p, mode));
                if (readsBack(c, d)) {
                    return c;
                }
            }
        }
        return exact.round(new MathContext(17, RoundingMode.HALF_EVEN));
    }

    private static boolean readsBack(BigDecimal c, double d) {
        return Double.parseDouble(c.toString()) == d;
    }

    /** Python's {@code repr(d)} of a finite double ("12.5", "0.0", "1e+16", "1e-05"). */
    static String repr(double d) {
        if (d == 0) {
            return (1 / d < 0) ? "-0.0" : "0.0";
        }
        BigDecimal v = shortest(Math.abs(d)).stripTrailingZeros();
        String digits = v.unscaledValue().toString();
        int decpt = digits.length() - v.scale(); // value = 0.DIGITS * 10^decpt
        StringBuilder sb = new StringBuilder(d < 0 ? "-" : "");
        if (decpt <= -4 || decpt > 16) {
            sb.append(digits.charAt(0));
            if (digits.length() > 1) {
                sb.append('.').append(digits, 1, digits.length());
            }
            int exp = decpt - 1;
            sb.append('e').append(exp < 0 ? '-' : '+');
            String e = Integer.toString(Math.abs(exp));
            if (e.length() < 2) {
                sb.append('0');
            }
            return sb.append(e).toString();
        }
        if (decpt <= 0) {
            sb.append("0.");
            sb.append("0".repeat(-decpt)).append(digits);
        } else if (decpt >= digits.length()) {
            sb.append(digits).append("0".repeat(decpt - digits.length())).append(".0");
        } else {
            sb.append(digits, 0, decpt).append('.').append(digits, decpt, digits.length());
        }
        return sb.toString();
    }

    // -- json.dumps of a string (ensure_ascii) --------------------------------------------------------------
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    /** {@code json.dumps(s)} with ensure_ascii (the default): non-ASCII and DEL as lowercase \\uXXXX. */
    static void appendString(StringBuilder sb, String s) {
        sb.append('"');
        for (int k = 0; k < s.length(); k++) {
            char c = s.charAt(k);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                case '\b': sb.append("\\b"); break;
                case '\f': sb.append("\\f"); break;
                default:
                    if (c < 0x20 || c > 0x7e) {
                        sb.append("\\u").append(HEX[c >> 12]).append(HEX[(c >> 8) & 15]).append(HEX[(c >> 4) & 15])
                                .append(HEX[c & 15]);
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }
}
