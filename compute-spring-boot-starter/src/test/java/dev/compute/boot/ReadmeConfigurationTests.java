package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.env.YamlPropertySourceLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.env.EnumerablePropertySource;
import org.springframework.core.env.PropertySource;
import org.springframework.core.io.ByteArrayResource;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The README's "Every property, with its default" block, read as the YAML it is: an application that pastes it starts,
 * and it names every property the starter binds (those of the configuration metadata the build generates), each with
 * the default the metadata gives.
 */
class ReadmeConfigurationTests {

    private static final String HEADING = "Every property, with its default";

    @Test
    void theBlockStartsAsItIs() throws Exception {
        List<PropertySource<?>> block = block();
        new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(ComputeMemoryAutoConfiguration.class))
                .withInitializer(context -> block.forEach(context.getEnvironment().getPropertySources()::addLast))
                .run(context -> assertThat(context).hasNotFailed());
    }

    @Test
    void theBlockNamesEveryPropertyWithItsDefault() throws Exception {
        Map<String, Object> readme = new LinkedHashMap<>();
        for (PropertySource<?> source : block()) {
            for (String name : ((EnumerablePropertySource<?>) source).getPropertyNames()) {
                readme.put(name, source.getProperty(name));
            }
        }
        JsonNode metadata = JsonMapper.builder().build()
                .readTree(Files.readString(Path.of("target/classes/META-INF/spring-configuration-metadata.json")));
        Set<String> missing = new TreeSet<>();
        Map<String, String> defaults = new LinkedHashMap<>();
        for (JsonNode property : metadata.get("properties")) {
            String name = property.get("name").asString();
            if (property.has("deprecation") || !(name.startsWith("compute.") || name.startsWith("management.health.compute."))) {
                continue; // the endpoints' access and caching are Actuator's, documented under "Observe it"
            }
            // a map or a list (budgets, warmup) is there with its entries
            if (readme.keySet().stream().noneMatch(key -> key.equals(name) || key.startsWith(name + ".") || key.startsWith(name + "["))) {
                missing.add(name);
            } else if (property.has("defaultValue") && readme.containsKey(name)) {
                String documented = String.valueOf(readme.get(name)).toLowerCase(Locale.ROOT);
                if (!documented.equals(property.get("defaultValue").asString().toLowerCase(Locale.ROOT))) {
                    defaults.put(name, readme.get(name) + " in the README, " + property.get("defaultValue").asString() + " in the metadata");
                }
            }
        }
        assertThat(missing).as("properties the starter binds that the README's block leaves out").isEmpty();
        assertThat(defaults).as("defaults the README states otherwise than the metadata").isEmpty();
    }

    /** The first YAML block after the heading, loaded as Spring Boot loads application.yml. */
    private static List<PropertySource<?>> block() throws Exception {
        String readme = Files.readString(Path.of("README.md"));
        int heading = readme.indexOf(HEADING);
        assertThat(heading).as("README.md has the section '%s'", HEADING).isNotNegative();
        int start = readme.indexOf("```yaml\n", heading) + "```yaml\n".length();
        String yaml = readme.substring(start, readme.indexOf("```", start));
        return new YamlPropertySourceLoader().load("README.md", new ByteArrayResource(yaml.getBytes(StandardCharsets.UTF_8)));
    }
}
