package dev.compute.sample;

import java.util.Arrays;
import tools.jackson.core.JsonParser;
import tools.jackson.core.JsonToken;
import tools.jackson.databind.DeserializationContext;
import tools.jackson.databind.ValueDeserializer;

/**
 * Reads an array of the API's numbers into a {@code double[]} of at most {@link VectorStore#MAX_LENGTH} elements,
 * refusing a longer one as soon as it is past the limit: Jackson's own reads the whole array first, so a body of a
 * billion numbers filled the heap (a 500, as any request then might get) before the service could count them. A value
 * that is no array is refused too, where Jackson's took a string for base64-encoded bytes. An element is read as
 * Jackson reads a {@code double} (a number, or a string of one, such as {@code "NaN"}, which the service then refuses).
 */
public final class VectorValuesDeserializer extends ValueDeserializer<double[]> {

    @Override
    public double[] deserialize(JsonParser parser, DeserializationContext context) {
        String field = parser.currentName();
        if (!parser.isExpectedStartArrayToken()) {
            throw new IllegalArgumentException("'" + field + "' must be an array of numbers, such as [1, 2.5]");
        }
        ValueDeserializer<Object> element = context.findRootValueDeserializer(context.constructType(double.class));
        double[] values = new double[16];
        int length = 0;
        for (JsonToken token = parser.nextToken(); token != JsonToken.END_ARRAY; token = parser.nextToken()) {
            if (length == VectorStore.MAX_LENGTH) {
                throw new IllegalArgumentException("'" + field + "' must have 1 to " + VectorStore.MAX_LENGTH + " elements, not more");
            }
            if (length == values.length) {
                values = Arrays.copyOf(values, Math.min(VectorStore.MAX_LENGTH, 2 * length));
            }
            values[length++] = token.isNumeric() ? parser.getDoubleValue() : (double) element.deserialize(parser, context);
        }
        return Arrays.copyOf(values, length);
    }
}
