package streamops.peer;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * jobs/demo/contract.py and jobs/demo/fold.py in Java: {@link #validate} is fold.validate (the first
 * reason in the contract's order), {@link #amountCents} is contract.amount_cents, {@link Profile#json} is
 * fold.profile_json (the bytes streamops writes to user-profiles).
 */
final class Contract {
    private Contract() {}

    static final String INVALID_JSON = "invalid_json";
    static final String NOT_AN_OBJECT = "not_an_object";
    static final String MISSING_USER_ID = "missing_user_id";
    static final String BAD_EVENT_TYPE = "bad_event_type";
    static final String BAD_AMOUNT = "bad_amount";
    static final String BAD_TS = "bad_ts";

    static final byte VIEW = 0;
    static final byte LOGIN = 1;
    static final byte PURCHASE = 2;
    static final String[] EVENT_TYPES = {"view", "login", "purchase"};

    /** contract.MAX_AMOUNT (1e12, exactly representable) */
    static final double MAX_AMOUNT = 1e12;
    static final long MAX_AMOUNT_INT = 1_000_000_000_000L;

    /** A valid event: what the fold needs of it (cents only for a purchase). */
    record Event(String userId, byte type, long cents, long ts) {}

    /** fold.validate's outcome: an event, or the reason. */
    record Checked(Event event, String reason) {
        static Checked bad(String reason) {
            return new Checked(null, reason);
        }
    }

    static Checked validate(byte[] value) {
        Object obj;
        try {
            if (value == null) {
                return Checked.bad(INVALID_JSON);
            }
            obj = PyJson.loads(PyJson.decodeUtf8(value));
        } catch (PyJson.Invalid e) {
            return Checked.bad(INVALID_JSON);
        } catch (StackOverflowError e) {
            return Checked.bad(INVALID_JSON); // RecursionError (MAX_DEPTH should come first)
        }
        if (!(obj instanceof Map<?, ?> map)) {
            return Checked.bad(NOT_AN_OBJECT);
        }
        if (!(map.get("user_id") instanceof String userId) || userId.isEmpty()) {
            return Checked.bad(MISSING_USER_ID);
        }
        byte type;
        Object et = map.get("event_type");
        if ("view".equals(et)) {
            type = VIEW;
        } else if ("login".equals(et)) {
            type = LOGIN;
        } else if ("purchase".equals(et)) {
            type = PURCHASE;
        } else {
            return Checked.bad(BAD_EVENT_TYPE);
        }
        Object amount = map.get("amount");
        if (!isAmount(amount)) {
            return Checked.bad(BAD_AMOUNT);
        }
        // an int that does not fit a long is above MAX_TS or negative (BigInteger only past long's range)
        if (!(map.get("ts") instanceof Long ts) || ts < 0) {
            return Checked.bad(BAD_TS);
        }
        return new Checked(new Event(userId, type, type == PURCHASE ? amountCents(amount) : 0, ts), null);
    }

    /** fold._is_amount: an int or a float (not a bool), finite, 0 <= amount <= MAX_AMOUNT. */
    static boolean isAmount(Object amount) {
        if (amount instanceof Long v) {
            return v >= 0 && v <= MAX_AMOUNT_INT;
        }
        if (amount instanceof PyJson.PyFloat f) {
            double d = f.value();
            return Double.isFinite(d) && d >= 0 && d <= MAX_AMOUNT;
        }
        return false; // BigInteger (out of range either way), strings, booleans, null, arrays, objects
    }

    /**
     * contract.amount_cents: {@code Decimal(str(amount)) * 100} rounded half up. For a float, str() is
     * repr, the shortest decimal that reads back; when the JSON text has at most 15 significant digits
     * that decimal has the text's value (any two such decimals are different doubles), so the text is
     * used as it is and {@link PyJson#shortest} only for longer ones.
     */
    static long amountCents(Object amount) {
        if (amount instanceof Long v) {
            return v * 100;
        }
        PyJson.PyFloat f = (PyJson.PyFloat) amount;
        BigDecimal dec = significantDigits(f.text()) <= 15 ? new BigDecimal(f.text()) : PyJson.shortest(f.value());
        return dec.movePointRight(2).setScale(0, RoundingMode.HALF_UP).longValueExact();
    }

    /** The significant digits of a JSON number's text (leading and trailing zeros of its mantissa left out). */
    static int significantDigits(String text) {
        int first = -1;
        int last = -1;
        int pos = 0;
        for (int k = 0; k < text.length(); k++) {
            char c = text.charAt(k);
            if (c == 'e' || c == 'E') {
                break;
            }
            if (c >= '0' && c <= '9') {
                if (c != '0') {
                    if (first < 0) {
                        first = pos;
                    }
                    last = pos;
                }
                pos++;
            }
        }
        return first < 0 ? 0 : last - first + 1;
    }

    /** A profile: fold's accumulator [last_login_ts, purchases, total cents, events]. */
    record Profile(long lastLoginTs, long purchases, long cents, long events) {
        static final long NO_LOGIN = Long.MIN_VALUE;
        static final Profile EMPTY = new Profile(NO_LOGIN, 0, 0, 0);

        Profile plus(Event e) {
            long last = lastLoginTs;
            if (e.type() == LOGIN && (last == NO_LOGIN || e.ts() > last)) {
                last = e.ts();
            }
            boolean purchase = e.type() == PURCHASE;
            return new Profile(last, purchases + (purchase ? 1 : 0), cents + (purchase ? e.cents() : 0), events + 1);
        }

        /** fold.profile_json of this profile: sorted keys, no spaces, ASCII. */
        byte[] json(String userId) {
            StringBuilder sb = new StringBuilder(96);
            sb.append("{\"events\":").append(events).append(",\"last_login_ts\":");
            if (lastLoginTs == NO_LOGIN) {
                sb.append("null");
            } else {
                sb.append(lastLoginTs);
            }
            sb.append(",\"purchases\":").append(purchases).append(",\"total_amount\":");
            appendAmount(sb, cents);
            sb.append(",\"user_id\":");
            PyJson.appendString(sb, userId);
            return sb.append('}').toString().getBytes(StandardCharsets.US_ASCII);
        }
    }

    /**
     * {@code repr(round(cents / 100, 2))}: that float is the double nearest cents/100; below 10^15 cents
     * (15 significant digits) its repr is the decimal itself ("12.5", "0.0"), written directly.
     */
    static void appendAmount(StringBuilder sb, long cents) {
        if (cents >= 0 && cents < 1_000_000_000_000_000L) {
            long units = cents / 100;
            int frac = (int) (cents % 100);
            sb.append(units).append('.');
            if (frac == 0) {
                sb.append('0');
            } else if (frac % 10 == 0) {
                sb.append(frac / 10);
            } else {
                sb.append(frac < 10 ? "0" : "").append(frac);
            }
            return;
        }
        sb.append(PyJson.repr(Double.parseDouble(BigDecimal.valueOf(cents).movePointLeft(2).toString())));
    }
}
