"""Realistic values for the CRMP demo: networks, variables, BC places, native ids.

Names follow the PCIC Climate Related Monitoring Program (networks such as EC, MoTIe, FLNRO-WMB,
BC Hydro; CF standard names and cell methods for the variables); coordinates are in and near
British Columbia. Nothing here is random by itself: the simulator draws from these lists with
its own seeded generators.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# (network_name, description, col_hex, native-id style)
NETWORKS: tuple[tuple[str, str, str, str], ...] = (
    ("EC", "Environment Canada (Canadian Daily Climate Data 2007)", "#FF0000", "ec"),
    ("MoTIe", "BC Ministry of Transportation and Infrastructure (electronic)", "#00FF00", "num5"),
    (
        "FLNRO-WMB",
        "BC Ministry of Forests, Lands, and Natural Resource Operations - Wild Fire Management Branch",
        "#FF6600",
        "num4",
    ),
    ("BCH", "BC Hydro", "#0000FF", "alpha3"),
    ("ENV-ASP", "BC Ministry of Environment - Automated Snow Pillow Network", "#00FFFF", "asp"),
    ("ARDA", "Agricultural and Rural Development Act Network", "#996633", "num6"),
    ("EC_raw", 'Environment Canada (raw observations from "Climate Data Online")', "#FF3333", "ec"),
    ("AGRI", "BC Ministry of Agriculture", "#66CC00", "num5"),
    ("ENV-AQN", "BC Ministry of Environment - Air Quality Network", "#9900CC", "aqn"),
    ("MVan", "Metro Vancouver", "#CC0066", "aqn"),
    (
        "FLNRO-FERN",
        "BC Ministry of Forests, Lands, and Natural Resource Operations - Forest Ecosystem Research Network",
        "#336600",
        "num4",
    ),
    ("RTA", "Rio Tinto Alcan", "#666666", "alpha3"),
    ("MoTIm", "BC Ministry of Transportation and Infrastructure (manual)", "#33CC33", "num5"),
    ("CRD", "Capital Regional District", "#3399FF", "num4"),
    ("FRBC", "Forest Renewal British Columbia", "#006633", "num4"),
    ("UNBC", "University of Northern British Columbia", "#FFCC00", "num4"),
    ("DFO", "Fisheries and Oceans Canada", "#000099", "num6"),
    ("YTG", "Government of Yukon - Water Resources Branch", "#CCCC00", "num5"),
    ("BCENV-WQ", "BC Ministry of Environment - Water Quality", "#00CC99", "num6"),
    ("Teck", "Teck Resources Limited", "#663300", "alpha3"),
)


@dataclass(frozen=True)
class VarSpec:
    """A variable a network may report. `kind` selects how values are simulated."""

    net_var_name: str
    standard_name: str
    cell_method: str
    unit: str
    precision: float
    display_name: str
    kind: str
    weight: float  # how commonly a station reports it


VARIABLES: tuple[VarSpec, ...] = (
    VarSpec("air_temperature", "air_temperature", "time: point", "celsius", 0.1, "Temperature (Point)", "temp", 1.0),
    VarSpec("precipitation", "precipitation_amount", "time: sum", "mm", 0.1, "Precipitation Amount", "precip", 0.9),
    VarSpec("MAX_TEMP", "air_temperature", "time: maximum", "celsius", 0.1, "Temperature (Max.)", "tmax", 0.6),
    VarSpec("MIN_TEMP", "air_temperature", "time: minimum", "celsius", 0.1, "Temperature (Min.)", "tmin", 0.6),
    VarSpec("rel_humidity", "relative_humidity", "time: point", "%", 1.0, "Relative Humidity", "rh", 0.5),
    VarSpec("wind_speed", "wind_speed", "time: mean", "km/h", 0.1, "Wind Speed", "wspd", 0.45),
    VarSpec("wind_direction", "wind_from_direction", "time: mean", "degree", 1.0, "Wind Direction", "wdir", 0.4),
    VarSpec("SNOW_ON_THE_GROUND", "surface_snow_thickness", "time: point", "cm", 1.0, "Snow Depth", "snowd", 0.3),
    VarSpec(
        "ONE_DAY_SNOW", "thickness_of_snowfall_amount", "time: sum", "cm", 0.2, "Snowfall Amount", "snowfall", 0.25
    ),
    VarSpec("ONE_DAY_RAIN", "thickness_of_rainfall_amount", "time: sum", "mm", 0.2, "Rainfall Amount", "precip", 0.25),
    VarSpec("air_pressure", "air_pressure", "time: point", "kPa", 0.01, "Air Pressure", "pres", 0.2),
    VarSpec("dew_point", "dew_point_temperature", "time: point", "celsius", 0.1, "Dew Point Temperature", "dewp", 0.2),
    VarSpec(
        "SWE", "lwe_thickness_of_surface_snow_amount", "time: point", "mm", 1.0, "Snow Water Equivalent", "swe", 0.15
    ),
    VarSpec("MEAN_TEMP", "air_temperature", "time: mean", "celsius", 0.1, "Temperature (Mean)", "temp", 0.3),
)
VAR_KINDS: tuple[str, ...] = (
    "temp",
    "tmax",
    "tmin",
    "dewp",
    "precip",
    "snowfall",
    "snowd",
    "swe",
    "rh",
    "wspd",
    "wdir",
    "pres",
)

# Per-network spelling of some variable names (EC uses upper-case codes, MoTIe long codes).
NET_VAR_SPELLING = {
    "ec": {
        "air_temperature": "TEMP",
        "precipitation": "ONE_DAY_PRECIPITATION",
        "rel_humidity": "REL_HUM",
        "wind_speed": "WIND_SPEED",
        "wind_direction": "WIND_DIRECTION",
        "air_pressure": "STN_PRESS",
        "dew_point": "DEW_POINT",
    },
    "num5": {
        "air_temperature": "CURRENT_AIR_TEMPERATURE1",
        "precipitation": "PRECIP_DETAIL1_PRECIP_AMOUNT",
        "rel_humidity": "RELATIVE_HUMIDITY1",
        "wind_speed": "WIND_SPEED_AVG",
        "wind_direction": "WIND_DIRECTION_AVG",
        "SNOW_ON_THE_GROUND": "HEIGHT_OF_SNOW",
        "dew_point": "DEW_POINT",
    },
    "num4": {
        "air_temperature": "temperature",
        "precipitation": "precipitation",
        "rel_humidity": "relative_humidity",
        "wind_speed": "wind_speed",
        "wind_direction": "wind_direction",
    },
}

# BC (and neighbouring) places: (name, lat, lon, typical elevation m, province)
PLACES: tuple[tuple[str, float, float, float, str], ...] = (
    ("Abbotsford", 49.05, -122.31, 59, "BC"),
    ("Agassiz", 49.24, -121.76, 15, "BC"),
    ("Alert Bay", 50.58, -126.93, 59, "BC"),
    ("Armstrong", 50.45, -119.20, 370, "BC"),
    ("Ashcroft", 50.72, -121.28, 305, "BC"),
    ("Atlin", 59.57, -133.70, 674, "BC"),
    ("Bella Coola", 52.37, -126.75, 36, "BC"),
    ("Blue River", 52.13, -119.29, 683, "BC"),
    ("Burns Lake", 54.23, -125.76, 713, "BC"),
    ("Cache Creek", 50.81, -121.32, 460, "BC"),
    ("Campbell River", 50.02, -125.24, 106, "BC"),
    ("Castlegar", 49.30, -117.63, 495, "BC"),
    ("Chetwynd", 55.70, -121.63, 615, "BC"),
    ("Chilliwack", 49.16, -121.95, 10, "BC"),
    ("Clearwater", 51.65, -120.04, 420, "BC"),
    ("Clinton", 51.09, -121.59, 887, "BC"),
    ("Comox", 49.72, -124.90, 26, "BC"),
    ("Courtenay", 49.69, -125.00, 20, "BC"),
    ("Cranbrook", 49.61, -115.78, 939, "BC"),
    ("Creston", 49.10, -116.51, 597, "BC"),
    ("Dawson Creek", 55.76, -120.24, 665, "BC"),
    ("Dease Lake", 58.43, -130.01, 807, "BC"),
    ("Duncan", 48.78, -123.71, 10, "BC"),
    ("Elko", 49.30, -115.10, 960, "BC"),
    ("Fernie", 49.50, -115.06, 1001, "BC"),
    ("Fort Nelson", 58.81, -122.70, 422, "BC"),
    ("Fort St. James", 54.44, -124.25, 686, "BC"),
    ("Fort St. John", 56.25, -120.85, 695, "BC"),
    ("Fraser Lake", 54.05, -124.85, 670, "BC"),
    ("Golden", 51.30, -116.97, 785, "BC"),
    ("Grand Forks", 49.03, -118.44, 532, "BC"),
    ("Hope", 49.38, -121.44, 39, "BC"),
    ("Houston", 54.40, -126.67, 606, "BC"),
    ("Hudson's Hope", 56.03, -121.91, 470, "BC"),
    ("Invermere", 50.51, -116.03, 850, "BC"),
    ("Kamloops", 50.67, -120.33, 345, "BC"),
    ("Kaslo", 49.91, -116.91, 590, "BC"),
    ("Kelowna", 49.89, -119.50, 344, "BC"),
    ("Kitimat", 54.05, -128.65, 98, "BC"),
    ("Ladysmith", 48.99, -123.82, 30, "BC"),
    ("Lillooet", 50.69, -121.94, 250, "BC"),
    ("Lytton", 50.23, -121.58, 174, "BC"),
    ("Mackenzie", 55.30, -123.14, 700, "BC"),
    ("Masset", 54.02, -132.12, 8, "BC"),
    ("McBride", 53.30, -120.17, 730, "BC"),
    ("Merritt", 50.11, -120.79, 570, "BC"),
    ("Nakusp", 50.24, -117.80, 455, "BC"),
    ("Nanaimo", 49.17, -123.94, 28, "BC"),
    ("Nelson", 49.49, -117.29, 535, "BC"),
    ("Osoyoos", 49.03, -119.44, 283, "BC"),
    ("Pemberton", 50.32, -122.80, 207, "BC"),
    ("Penticton", 49.46, -119.60, 344, "BC"),
    ("Port Alberni", 49.23, -124.81, 2, "BC"),
    ("Port Hardy", 50.68, -127.37, 22, "BC"),
    ("Powell River", 49.84, -124.52, 52, "BC"),
    ("Prince George", 53.92, -122.75, 691, "BC"),
    ("Prince Rupert", 54.31, -130.32, 35, "BC"),
    ("Princeton", 49.46, -120.51, 700, "BC"),
    ("Quesnel", 52.98, -122.49, 545, "BC"),
    ("Revelstoke", 51.00, -118.20, 450, "BC"),
    ("Salmon Arm", 50.70, -119.29, 351, "BC"),
    ("Sechelt", 49.47, -123.75, 25, "BC"),
    ("Smithers", 54.78, -127.17, 522, "BC"),
    ("Sparwood", 49.73, -114.88, 1140, "BC"),
    ("Squamish", 49.70, -123.16, 52, "BC"),
    ("Stewart", 55.94, -129.99, 7, "BC"),
    ("Summerland", 49.60, -119.67, 454, "BC"),
    ("Terrace", 54.52, -128.60, 67, "BC"),
    ("Tofino", 49.15, -125.91, 10, "BC"),
    ("Trail", 49.10, -117.71, 430, "BC"),
    ("Tumbler Ridge", 55.13, -120.99, 832, "BC"),
    ("Ucluelet", 48.94, -125.55, 10, "BC"),
    ("Valemount", 52.83, -119.26, 797, "BC"),
    ("Vancouver", 49.26, -123.11, 10, "BC"),
    ("Vanderhoof", 54.02, -124.01, 640, "BC"),
    ("Vernon", 50.27, -119.27, 383, "BC"),
    ("Victoria", 48.43, -123.37, 20, "BC"),
    ("Whistler", 50.12, -122.95, 658, "BC"),
    ("Williams Lake", 52.14, -122.14, 586, "BC"),
    ("Yoho", 51.44, -116.34, 1580, "BC"),
    ("Coquihalla Summit", 49.60, -121.10, 1230, "BC"),
    ("Rogers Pass", 51.30, -117.52, 1330, "BC"),
    ("Kootenay Pass", 49.06, -117.04, 1775, "BC"),
    ("Pine Pass", 55.40, -122.63, 935, "BC"),
    ("Babine Lake", 54.75, -126.00, 711, "BC"),
    ("Chilko Lake", 51.33, -124.08, 1172, "BC"),
    ("Stave Lake", 49.37, -122.30, 82, "BC"),
    ("Mica Dam", 52.05, -118.58, 579, "BC"),
    ("Whitehorse", 60.72, -135.06, 706, "YT"),
    ("Watson Lake", 60.06, -128.71, 687, "YT"),
    ("Jasper", 52.87, -118.08, 1062, "AB"),
    ("Grande Prairie", 55.17, -118.80, 669, "AB"),
    ("Banff", 51.18, -115.57, 1397, "AB"),
    ("Pincher Creek", 49.49, -113.95, 1130, "AB"),
)

SUFFIXES: tuple[str, ...] = (
    "",
    "",
    "",
    " Airport",
    " A",
    " North",
    " South",
    " East",
    " West",
    " Creek",
    " Lake",
    " Upper",
    " Lower",
    " Summit",
    " Hill",
    " Mountain",
    " Dam",
    " Pass",
    " Forest Service",
    " Ranger Station",
    " CS",
    " Auto",
    " Landing",
    " River",
    " Flats",
    " Ridge",
    " Bench",
    " Junction",
    " Marsh",
    " Reservoir",
)


def place(rng: random.Random) -> tuple[str, float, float, float, str]:
    """A station name with coordinates and elevation near a real place."""
    name, lat, lon, elev, prov = PLACES[rng.randrange(len(PLACES))]
    suffix = SUFFIXES[rng.randrange(len(SUFFIXES))]
    dlat, dlon = rng.gauss(0, 0.15), rng.gauss(0, 0.2)
    el = max(0.0, elev + rng.gauss(0, 150) + (300 if suffix in (" Summit", " Mountain", " Pass", " Ridge") else 0))
    return (name + suffix, round(lat + dlat, 4), round(lon + dlon, 4), float(round(el)), prov)


def native_id(rng: random.Random, style: str, n: int) -> str:
    """A station identifier in the network's own style (`n` keeps them mostly unique)."""
    if style == "ec":
        alnum = "0123456789ABCDEFGHJKLMNP"
        return "1" + "".join(rng.choice("0123456789") for _ in range(2)) + "".join(rng.choice(alnum) for _ in range(4))
    if style == "num5":
        return f"{(n * 7919 + rng.randrange(100)) % 90000 + 10000:05d}"
    if style == "num4":
        return f"{(n * 613 + rng.randrange(10)) % 9000 + 1000}"
    if style == "num6":
        return f"{(n * 104729 + rng.randrange(1000)) % 900000 + 100000}"
    if style == "alpha3":
        letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
        return "".join(rng.choice(letters) for _ in range(3))
    if style == "asp":
        return f"{rng.randrange(1, 5)}{rng.choice('ABCDEF')}{rng.randrange(1, 30):02d}P"
    if style == "aqn":
        return f"E{rng.randrange(200000, 330000)}"
    return f"{n:06d}"


def network_row(i: int, rng: random.Random) -> tuple[str, str, str, str]:
    """(network_name, description, col_hex, native-id style) of the i-th network (0-based)."""
    if i < len(NETWORKS):
        return NETWORKS[i]
    style = rng.choice(("num4", "num5", "num6", "alpha3"))
    return (f"NET{i + 1:03d}", f"Regional climate monitoring network {i + 1}", random_colour(rng), style)


def random_colour(rng: random.Random) -> str:
    return f"#{rng.randrange(256):02X}{rng.randrange(256):02X}{rng.randrange(256):02X}"


def choose_vars(rng: random.Random, k: int) -> list[VarSpec]:
    """k distinct variables, weighted by how commonly stations report them (temperature first)."""
    pool = list(VARIABLES)
    out: list[VarSpec] = [pool.pop(0)]
    while len(out) < k and pool:
        total = sum(v.weight for v in pool)
        x = rng.random() * total
        for j, v in enumerate(pool):
            x -= v.weight
            if x <= 0:
                out.append(pool.pop(j))
                break
        else:
            out.append(pool.pop())
    return out


FREQS: tuple[str, ...] = ("1-hour", "12-hour", "daily", "irregular")
FREQ_WEIGHTS: tuple[float, ...] = (0.6, 0.1, 0.25, 0.05)

DESCRIPTION_EDITS: tuple[str, ...] = (" (archived)", " - telemetry", " [QA]", " (legacy)", " - real time")
