package dev.compute.memory;

/**
 * A setting the manager cannot run with. Names the property as it is spelled in {@code application.yml},
 * the value given and what is allowed, so a failure analyzer can show it as it is.
 */
public class InvalidSettingException extends ComputeMemoryException {
    private final String property;
    private final String value;
    private final String allowed;

    public InvalidSettingException(String property, Object value, String allowed) {
        super("invalid value '" + value + "' for " + property + ": " + allowed);
        this.property = property;
        this.value = String.valueOf(value);
        this.allowed = allowed;
    }

    public String property() {
        return property;
    }

    public String value() {
        return value;
    }

    public String allowed() {
        return allowed;
    }
}
